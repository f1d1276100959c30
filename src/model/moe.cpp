#include "model/moe.h"

#include <algorithm>

#include "core/error.h"
#include "core/profile.h"

namespace mt {

std::pair<int64_t, int64_t> expert_proj_dims(ExpertProj p, const ModelConfig& c) {
  const int64_t C = c.hidden_size, I = c.moe_intermediate_size;
  return p == kExpertDown ? std::pair{C, I} : std::pair{I, C};
}

MoeActivationSizes moe_activation_sizes(const ModelConfig& c, int64_t lora_rank,
                                            const std::array<bool, kNumExpertProj>& experts_lora) {
  if (!c.moe()) return {};
  const int64_t k = c.num_experts_per_tok, I = c.moe_intermediate_size, C = c.hidden_size;
  // gate up h out (lora u x 3) per choice; weights slots token_rows.
  int64_t adapters = 0;
  for (bool on : experts_lora) adapters += on ? lora_rank : 0;
  return {k * (3 * I + C + adapters), 3 * k};
}

MoeActivations carve_moe_activations(ArenaCursor& t, ArenaCursor& f, int64_t N, const ModelConfig& c,
                                     int64_t lora_rank,
                                            const std::array<bool, kNumExpertProj>& experts_lora) {
  MoeActivations a;
  if (!c.moe()) return a;
  const int64_t M = N * c.num_experts_per_tok, I = c.moe_intermediate_size, C = c.hidden_size;
  a.gate = t.take(M, I), a.up = t.take(M, I), a.h = t.take(M, I), a.out = t.take(M, C);
  for (int p = 0; p < kNumExpertProj; ++p)
    if (experts_lora[size_t(p)]) a.lora_u[size_t(p)] = t.take(M, lora_rank);
  a.weights = f.take(M, 1), a.slots = f.take_i32(M, 1), a.token_rows = f.take_i32(M, 1);
  return a;
}

namespace {

int64_t moe_row_width(const ModelConfig& c) {
  return std::max({c.hidden_size, c.moe_intermediate_size, c.num_experts});
}

}  // namespace

int64_t moe_scratch_elems(const ModelConfig& c, int64_t N, int64_t lora_rank) {
  if (!c.moe()) return 0;
  const int64_t M = N * c.num_experts_per_tok;
  return M * (2 * moe_row_width(c) + 2 * c.moe_intermediate_size + std::max<int64_t>(lora_rank, 1));
}

int64_t moe_scratch_f32_elems(const ModelConfig& c, int64_t N) {
  return c.moe() ? N * (c.num_experts + c.num_experts_per_tok) : 0;
}

MoeScratch carve_moe_scratch(ArenaCursor& t, const ModelConfig& c, int64_t N, int64_t lora_rank) {
  MoeScratch s;
  if (!c.moe()) return s;
  const int64_t M = N * c.num_experts_per_tok, W = moe_row_width(c), I = c.moe_intermediate_size;
  s.a = t.take(1, M * W), s.b = t.take(1, M * W);
  s.dgate = t.take(1, M * I), s.dup = t.take(1, M * I);
  s.du = t.take(1, M * std::max<int64_t>(lora_rank, 1));
  return s;
}

void carve_moe_scratch_f32(MoeScratch& s, ArenaCursor& f32, const ModelConfig& c, int64_t N) {
  if (!c.moe()) return;
  s.logits = f32.take(N, c.num_experts);
  s.dweights = f32.take(N * c.num_experts_per_tok, 1);
}

namespace {

MoeRoutingConfig routing_config(const ModelConfig& c) {
  return {c.num_experts, c.num_experts_per_tok, c.norm_topk_prob, double(c.moe_capacity_factor)};
}

// Expert e's rows [offsets[e], offsets[e + 1]) of an expert-ordered tensor.
Tensor expert_rows(const Tensor& t, const MoeRouting& r, int64_t e) {
  return t.rows_slice(r.offsets[size_t(e)], r.offsets[size_t(e + 1)] - r.offsets[size_t(e)]);
}

}  // namespace

void moe_forward(Backend& be, const Tensor& delta, const Tensor& n2, const MoeActivations& a,
                 const MoeWeights& w, const ModelConfig& c, const MoeScratch& s,
                 const MoeLossContext& loss) {
  MT_CHECK(a.routing, "moe_forward without a routing record");
  const int64_t N = n2.rows, C = c.hidden_size, E = c.num_experts;
  MoeRouting& r = *a.routing;
  {
    MT_PROFILE("moe router");
    const Tensor logits = rows_of(s.logits, N, E);
    be.linear_forward(logits, n2, w.router.W);
    std::vector<float> host(size_t(N * E));
    be.copy_to_host(host.data(), logits);
    r = route_tokens(host.data(), N, routing_config(c));
    if (loss.gather) add_balance_stats(*loss.gather, r, nullptr);
    be.copy_from_host(a.weights, r.weights.data());
    be.copy_from_host(a.slots, r.slots.data());
    std::vector<int32_t> rows(r.token_of_row);
    rows.resize(size_t(a.token_rows.numel()), 0);
    be.copy_from_host(a.token_rows, rows.data());
  }
  const int64_t M = r.rows();
  const Tensor x = rows_of(s.a, M, C);
  {
    MT_PROFILE("moe dispatch");
    be.gather_rows(x, n2, a.token_rows.rows_slice(0, M));
  }
  const Tensor gate = a.gate.rows_slice(0, M), up = a.up.rows_slice(0, M), h = a.h.rows_slice(0, M);
  const Tensor out = a.out.rows_slice(0, M);
  {
    MT_PROFILE("moe experts");
    for (int64_t e = 0; e < E; ++e) {
      if (r.offsets[size_t(e + 1)] == r.offsets[size_t(e)]) continue;
      const auto& ew = w.experts[size_t(e)];
      const Tensor xe = expert_rows(x, r, e);
      auto u = [&](ExpertProj p) { return a.lora_u[p] ? expert_rows(a.lora_u[p].rows_slice(0, M), r, e) : Tensor{}; };
      linear_layer_forward(be, expert_rows(gate, r, e), u(kExpertGate), xe, ew[kExpertGate]);
      linear_layer_forward(be, expert_rows(up, r, e), u(kExpertUp), xe, ew[kExpertUp]);
    }
    if (M > 0) be.swiglu_forward(h, gate, up);
    for (int64_t e = 0; e < E; ++e) {
      if (r.offsets[size_t(e + 1)] == r.offsets[size_t(e)]) continue;
      const Tensor ue = a.lora_u[kExpertDown] ? expert_rows(a.lora_u[kExpertDown].rows_slice(0, M), r, e) : Tensor{};
      linear_layer_forward(be, expert_rows(out, r, e), ue, expert_rows(h, r, e), w.experts[size_t(e)][kExpertDown]);
    }
  }
  MT_PROFILE("moe combine");
  be.combine_rows(delta, out, a.slots, a.weights, c.num_experts_per_tok, false);
}

void moe_backward(Backend& be, const Tensor& dn2, const Tensor& ddelta, const Tensor& n2,
                  const MoeActivations& a, const MoeWeights& w, const ModelConfig& c,
                  const MoeScratch& s, const MoeLossContext& loss) {
  MT_CHECK(a.routing, "moe_backward without a routing record");
  const MoeRouting& r = *a.routing;
  const int64_t N = n2.rows, C = c.hidden_size, E = c.num_experts, I = c.moe_intermediate_size;
  const int64_t k = c.num_experts_per_tok, M = r.rows();
  const Tensor out = a.out.rows_slice(0, M), h = a.h.rows_slice(0, M);
  const Tensor gate = a.gate.rows_slice(0, M), up = a.up.rows_slice(0, M);
  const Tensor dweights = rows_of(s.dweights, N * k, 1);
  const Tensor dout = rows_of(s.a, M, C);
  {
    MT_PROFILE("moe combine backward");
    be.combine_rows_backward(dout, dweights, ddelta, out, a.slots, a.weights, k);
  }
  auto u = [&](ExpertProj p, int64_t e) {
    return a.lora_u[p] ? expert_rows(a.lora_u[p].rows_slice(0, M), r, e) : Tensor{};
  };
  auto du = [&](ExpertProj p, int64_t e) {
    const LinearWeights& lw = w.experts[size_t(e)][p];
    const int64_t n = r.offsets[size_t(e + 1)] - r.offsets[size_t(e)];
    return rows_of(s.du, n, std::max<int64_t>(lw.rank(), 1));
  };
  const Tensor dh = rows_of(s.b, M, I), dgate = rows_of(s.dgate, M, I), dup = rows_of(s.dup, M, I);
  {
    MT_PROFILE("moe experts backward");
    for (int64_t e = 0; e < E; ++e) {
      if (r.offsets[size_t(e + 1)] == r.offsets[size_t(e)]) continue;
      linear_layer_backward(be, expert_rows(dh, r, e), false, du(kExpertDown, e), expert_rows(dout, r, e),
                            expert_rows(h, r, e), u(kExpertDown, e), w.experts[size_t(e)][kExpertDown]);
    }
    if (M > 0) be.swiglu_backward(dgate, dup, dh, gate, up);
  }
  const Tensor x = rows_of(s.a, M, C);  // the dispatched rows again (dout is read)
  {
    MT_PROFILE("moe dispatch");
    be.gather_rows(x, n2, a.token_rows.rows_slice(0, M));
  }
  const Tensor dx = rows_of(s.b, M, C);  // dh is read
  {
    MT_PROFILE("moe experts backward");
    for (int64_t e = 0; e < E; ++e) {
      if (r.offsets[size_t(e + 1)] == r.offsets[size_t(e)]) continue;
      const auto& ew = w.experts[size_t(e)];
      const Tensor xe = expert_rows(x, r, e), dxe = expert_rows(dx, r, e);
      linear_layer_backward(be, dxe, false, du(kExpertGate, e), expert_rows(dgate, r, e), xe,
                            u(kExpertGate, e), ew[kExpertGate]);
      linear_layer_backward(be, dxe, true, du(kExpertUp, e), expert_rows(dup, r, e), xe,
                            u(kExpertUp, e), ew[kExpertUp]);
    }
  }
  {
    MT_PROFILE("moe combine backward");
    be.combine_rows(dn2, dx, a.slots, Tensor{}, k, false);  // each token's k copies summed
  }
  MT_PROFILE("moe router backward");
  std::vector<float> dw(size_t(N * k)), dlogits(size_t(N * E));
  be.copy_to_host(dw.data(), dweights);
  static const MoeBalanceStats kNone;
  const MoeBalanceStats& stats = loss.stats ? *loss.stats : kNone;
  route_backward(dlogits.data(), r, dw.data(), routing_config(c), stats, nullptr, c.aux_loss_coef(),
                 c.router_z_loss_coef, loss.loss_scale);
  const Tensor dlogits_f32 = rows_of(s.logits, N, E);
  be.copy_from_host(dlogits_f32, dlogits.data());
  // The router's products in the compute dtype, as every projection's (its gradient rounded once).
  Tensor dlogits_t = dlogits_f32;
  if (n2.dtype != DType::f32) {
    dlogits_t = rows_of(s.b, N, E);  // dx, summed into dn2 above
    be.convert(dlogits_t, dlogits_f32);
  }
  be.linear_backward_input(dn2, dlogits_t, w.router.W, 1.0f, true);
  if (w.router.dW) be.linear_backward_weight(w.router.dW, dlogits_t, n2);
}

}  // namespace mt
