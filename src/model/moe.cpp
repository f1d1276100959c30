#include "model/moe.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/profile.h"
#include "model/expert_products.h"

namespace mt {

std::pair<int64_t, int64_t> expert_proj_dims(ExpertProj p, const ModelConfig& c) {
  const int64_t C = c.hidden_size, I = c.moe_intermediate_size;
  return p == kExpertDown ? std::pair{C, I} : std::pair{I, C};
}

int64_t moe_expert_rows(const ModelConfig& c, int64_t N) {
  if (!c.moe()) return 0;
  const int64_t own = N * c.num_experts_per_tok, dropless = own * c.expert_shards();
  if (c.moe_capacity_factor <= 0.0f || c.expert_shards() == 1) return dropless;
  // The capacity as moe_routing.cpp computes it from a shard's own N k choices.
  const auto capacity = int64_t(std::ceil(double(c.moe_capacity_factor) * double(own) / double(c.num_experts)));
  return std::min(dropless, std::max(own, c.num_experts * capacity));
}

MoeActivationSizes moe_activation_sizes(const ModelConfig& c, int64_t lora_rank,
                                            const std::array<bool, kNumExpertProj>& experts_lora) {
  if (!c.moe()) return {};
  const int64_t k = c.num_experts_per_tok, I = c.moe_intermediate_size, C = c.hidden_size;
  const int64_t S = c.expert_shards();
  // Per expert row: gate up h (lora u x 3), under expert parallelism the two row orders; per
  // choice (k a token): out, weights, slots, token_rows.
  int64_t adapters = 0;
  for (bool on : experts_lora) adapters += on ? lora_rank : 0;
  return {k * C, 3 * k, 3 * I + adapters, S > 1 ? 2 : 0};
}

MoeActivations carve_moe_activations(ArenaCursor& t, ArenaCursor& f, int64_t N, const ModelConfig& c,
                                     int64_t lora_rank,
                                            const std::array<bool, kNumExpertProj>& experts_lora) {
  MoeActivations a;
  if (!c.moe()) return a;
  const int64_t M = N * c.num_experts_per_tok, R = moe_expert_rows(c, N);
  const int64_t I = c.moe_intermediate_size, C = c.hidden_size;
  a.gate = t.take(R, I), a.up = t.take(R, I), a.h = t.take(R, I), a.out = t.take(M, C);
  for (int p = 0; p < kNumExpertProj; ++p)
    if (experts_lora[size_t(p)]) a.lora_u[size_t(p)] = t.take(R, lora_rank);
  a.weights = f.take(M, 1), a.slots = f.take_i32(M, 1), a.token_rows = f.take_i32(M, 1);
  if (c.expert_shards() > 1) a.to_expert = f.take_i32(R, 1), a.from_expert = f.take_i32(R, 1);
  return a;
}

namespace {

int64_t moe_row_width(const ModelConfig& c) {
  return std::max({c.hidden_size, c.moe_intermediate_size, c.num_experts});
}

}  // namespace

int64_t moe_scratch_elems(const ModelConfig& c, int64_t N, int64_t lora_rank) {
  if (!c.moe()) return 0;
  const int64_t R = moe_expert_rows(c, N);  // >= the N k routed rows
  return R * (2 * moe_row_width(c) + 2 * c.moe_intermediate_size + std::max<int64_t>(lora_rank, 1));
}

int64_t moe_scratch_f32_elems(const ModelConfig& c, int64_t N) {
  return c.moe() ? N * (c.num_experts + c.num_experts_per_tok) : 0;
}

MoeScratch carve_moe_scratch(ArenaCursor& t, const ModelConfig& c, int64_t N, int64_t lora_rank) {
  MoeScratch s;
  if (!c.moe()) return s;
  const int64_t R = moe_expert_rows(c, N), W = moe_row_width(c), I = c.moe_intermediate_size;
  s.a = t.take(1, R * W), s.b = t.take(1, R * W);
  s.dgate = t.take(1, R * I), s.dup = t.take(1, R * I);
  s.du = t.take(1, R * std::max<int64_t>(lora_rank, 1));
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

// Local expert j's rows [off[j], off[j + 1]) of a tensor in this rank's expert order.
Tensor expert_rows(const Tensor& t, const std::vector<int64_t>& off, int64_t j) {
  return t.rows_slice(off[size_t(j)], off[size_t(j + 1)] - off[size_t(j)]);
}
bool no_rows(const std::vector<int64_t>& off, int64_t j) { return off[size_t(j + 1)] == off[size_t(j)]; }

// What expert parallelism moves, decided once a forward: the rows this rank routed to each shard's
// experts (contiguous in the routing's expert order: shard p holds experts [p L, (p + 1) L)), the
// counts the shards exchange first, and the two orders of the rows received (shard major, as they
// arrive; this rank's expert major, as its experts compute them). Without it the routing's own
// expert order is the local one.
void plan_exchange(Backend& be, MoeRouting& r, const MoeActivations& a, const ModelConfig& c, ModelParallel& par) {
  const int64_t S = c.expert_shards(), L = c.local_experts();
  if (S == 1) {
    r.local_offsets = r.offsets;
    return;
  }
  std::vector<int64_t> counts(size_t(S * L)), got(size_t(S * L));
  for (int64_t e = 0; e < S * L; ++e) counts[size_t(e)] = r.offsets[size_t(e + 1)] - r.offsets[size_t(e)];
  par.exchange_expert_counts(counts.data(), got.data(), S * L);
  r.send_rows.assign(size_t(S), 0), r.recv_rows.assign(size_t(S), 0), r.local_offsets.assign(size_t(L + 1), 0);
  for (int64_t p = 0; p < S; ++p)
    for (int64_t j = 0; j < L; ++j) {
      r.send_rows[size_t(p)] += counts[size_t(p * L + j)];
      r.recv_rows[size_t(p)] += got[size_t(p * L + j)];
      r.local_offsets[size_t(j + 1)] += got[size_t(p * L + j)];
    }
  for (int64_t j = 0; j < L; ++j) r.local_offsets[size_t(j + 1)] += r.local_offsets[size_t(j)];
  const int64_t R = r.local_offsets.back();
  MT_CHECK(R <= a.to_expert.rows,
           "expert parallelism: more rows received than planned for (moe_expert_rows: every shard's choices, or "
           "what a capacity factor lets through)");
  std::vector<int32_t> to(static_cast<size_t>(R)), from(static_cast<size_t>(R));
  std::vector<int64_t> next(r.local_offsets.begin(), r.local_offsets.end() - 1);  // per expert
  int64_t arrived = 0;  // shard q's block for expert j starts here among the received rows
  for (int64_t q = 0; q < S; ++q)
    for (int64_t j = 0; j < L; ++j)
      for (int64_t t = 0; t < got[size_t(q * L + j)]; ++t, ++arrived) {
        const int64_t at = next[size_t(j)]++;
        to[size_t(at)] = int32_t(arrived), from[size_t(arrived)] = int32_t(at);
      }
  if (R > 0) {
    be.copy_from_host(a.to_expert.rows_slice(0, R), to.data());
    be.copy_from_host(a.from_expert.rows_slice(0, R), from.data());
  }
}

// Rows of `src` in the routing's expert order [M, C] -> this rank's expert order [R, C] in `dst`,
// through the shards (`via` [R, C]: the rows as they arrive). Without expert parallelism: src.
Tensor to_local_experts(Backend& be, const Tensor& dst, const Tensor& via, const Tensor& src, const MoeRouting& r,
                        const MoeActivations& a, ModelParallel& par) {
  if (r.send_rows.empty()) return src;
  par.exchange_expert_rows(via, r.recv_rows, src, r.send_rows);
  if (dst.rows > 0) be.gather_rows(dst, via, a.to_expert.rows_slice(0, dst.rows));
  return dst;
}

// The inverse: rows `src` [R, C] in this rank's expert order -> `dst` [M, C] in the routing's
// expert order (their tokens' shards), through `via` [R, C].
void from_local_experts(Backend& be, const Tensor& dst, const Tensor& via, const Tensor& src, const MoeRouting& r,
                        const MoeActivations& a, ModelParallel& par) {
  if (src.rows > 0) be.gather_rows(via, src, a.from_expert.rows_slice(0, src.rows));
  par.exchange_expert_rows(dst, r.send_rows, via, r.recv_rows);
}

}  // namespace

void moe_forward(Backend& be, const Tensor& delta, const Tensor& n2, const MoeActivations& a,
                 const MoeWeights& w, const ModelConfig& c, const MoeScratch& s,
                 const MoeLossContext& loss, ModelParallel& par) {
  MT_CHECK(a.routing, "moe_forward without a routing record");
  const int64_t N = n2.rows, C = c.hidden_size, E = c.num_experts, L = c.local_experts();
  const bool shards = c.expert_shards() > 1;
  MoeRouting& r = *a.routing;
  {
    MT_PROFILE("moe router");
    const Tensor logits = rows_of(s.logits, N, E);
    be.linear_forward(logits, n2, w.router.W);
    std::vector<float> host(size_t(N * E));
    be.copy_to_host(host.data(), logits);
    r = route_tokens(host.data(), N, routing_config(c));
    if (loss.gather) add_balance_stats(*loss.gather, r, loss.counted);
    be.copy_from_host(a.weights, r.weights.data());
    be.copy_from_host(a.slots, r.slots.data());
    std::vector<int32_t> rows(r.token_of_row);
    rows.resize(size_t(a.token_rows.numel()), 0);
    be.copy_from_host(a.token_rows, rows.data());
  }
  {
    MT_PROFILE("moe expert counts");
    plan_exchange(be, r, a, c, par);
  }
  const int64_t M = r.rows(), R = r.received();
  const std::vector<int64_t>& off = r.local_offsets;
  const Tensor x = rows_of(s.a, M, C);
  {
    MT_PROFILE("moe dispatch");
    be.gather_rows(x, n2, a.token_rows.rows_slice(0, M));
  }
  Tensor xe;
  {
    MT_PROFILE("moe all-to-all");
    xe = to_local_experts(be, rows_of(s.a, R, C), rows_of(s.b, R, C), x, r, a, par);
  }
  const Tensor gate = a.gate.rows_slice(0, R), up = a.up.rows_slice(0, R), h = a.h.rows_slice(0, R);
  const Tensor out = a.out.rows_slice(0, M);
  const Tensor out_e = shards ? rows_of(s.b, R, C) : out;  // the experts' outputs, in their order
  {
    MT_PROFILE("moe experts");
    auto u = [&](ExpertProj p, int64_t j) {
      return a.lora_u[p] ? expert_rows(a.lora_u[p].rows_slice(0, R), off, j) : Tensor{};
    };
    // Each projection's products over the experts as one group (model/expert_products.h).
    std::vector<ExpertLayer> group;
    for (int64_t j = 0; j < L; ++j) {
      if (no_rows(off, j)) continue;
      const auto& ew = w.experts[size_t(j)];
      const Tensor xj = expert_rows(xe, off, j);
      group.push_back(forward_layer(expert_rows(gate, off, j), u(kExpertGate, j), xj, ew[kExpertGate]));
      group.push_back(forward_layer(expert_rows(up, off, j), u(kExpertUp, j), xj, ew[kExpertUp]));
    }
    expert_layers_forward(be, group);
    if (R > 0) be.swiglu_forward(h, gate, up);
    // down is row-parallel under tensor parallelism: each rank's product is a partial sum (summed
    // after the combine, model/block.cpp), and so is an adapter's inner product, summed here
    // before B applies; B u is then added by one rank, so the sum over the ranks counts it once.
    const Tensor u_down = a.lora_u[kExpertDown] ? a.lora_u[kExpertDown].rows_slice(0, R) : Tensor{};
    group.clear();
    for (int64_t j = 0; j < L; ++j)
      if (!no_rows(off, j))
        group.push_back(forward_layer(expert_rows(out_e, off, j), u(kExpertDown, j), expert_rows(h, off, j),
                                      w.experts[size_t(j)][kExpertDown]));
    expert_products_forward(be, group);
    expert_adapters_inner(be, group);
    if (u_down) {
      par.reduce_sum(u_down);
      if (par.leads_tensor_group()) expert_adapters_outer(be, group);
    }
  }
  if (shards) {
    MT_PROFILE("moe all-to-all");
    from_local_experts(be, out, rows_of(s.a, R, C), out_e, r, a, par);
  }
  MT_PROFILE("moe combine");
  be.combine_rows(delta, out, a.slots, a.weights, c.num_experts_per_tok, false);
}

void moe_backward(Backend& be, const Tensor& dn2, const Tensor& ddelta, const Tensor& n2,
                  const MoeActivations& a, const MoeWeights& w, const ModelConfig& c,
                  const MoeScratch& s, const MoeLossContext& loss, ModelParallel& par) {
  MT_CHECK(a.routing, "moe_backward without a routing record");
  const MoeRouting& r = *a.routing;
  const int64_t N = n2.rows, C = c.hidden_size, E = c.num_experts, I = c.moe_intermediate_size;
  const int64_t k = c.num_experts_per_tok, M = r.rows(), R = r.received(), L = c.local_experts();
  const bool shards = c.expert_shards() > 1;
  const std::vector<int64_t>& off = r.local_offsets;
  const Tensor out = a.out.rows_slice(0, M), h = a.h.rows_slice(0, R);
  const Tensor gate = a.gate.rows_slice(0, R), up = a.up.rows_slice(0, R);
  const Tensor dweights = rows_of(s.dweights, N * k, 1);
  const Tensor dout = rows_of(s.a, M, C);
  {
    MT_PROFILE("moe combine backward");
    be.combine_rows_backward(dout, dweights, ddelta, out, a.slots, a.weights, k);
    // Under tensor parallelism `out` is this rank's partial sum: so is each weight's gradient
    // (a dot product with it), summed here to the whole one every rank routes with.
    par.reduce_sum(dweights);
  }
  Tensor dout_e;
  {
    MT_PROFILE("moe all-to-all");
    dout_e = to_local_experts(be, rows_of(s.a, R, C), rows_of(s.b, R, C), dout, r, a, par);
  }
  auto u = [&](ExpertProj p, int64_t j) {
    return a.lora_u[p] ? expert_rows(a.lora_u[p].rows_slice(0, R), off, j) : Tensor{};
  };
  // Each expert's du at its own rows of the scratch: a projection's adapters run as groups
  // (expert_layers_backward), so no two experts may share one.
  auto du = [&](ExpertProj p, int64_t j) {
    const int64_t r = std::max<int64_t>(w.experts[size_t(j)][p].rank(), 1);
    return s.du.flat_slice(off[size_t(j)] * r, (off[size_t(j + 1)] - off[size_t(j)]) * r).view(off[size_t(j + 1)] - off[size_t(j)], r);
  };
  const Tensor dh = rows_of(s.b, R, I), dgate = rows_of(s.dgate, R, I), dup = rows_of(s.dup, R, I);
  {
    MT_PROFILE("moe experts backward");
    std::vector<ExpertLayer> group;  // one projection's products over the experts as one group
    for (int64_t j = 0; j < L; ++j)
      if (!no_rows(off, j))
        group.push_back(backward_layer(expert_rows(dh, off, j), du(kExpertDown, j), expert_rows(dout_e, off, j),
                                       expert_rows(h, off, j), u(kExpertDown, j), w.experts[size_t(j)][kExpertDown]));
    expert_layers_backward(be, group, false);
    if (R > 0) be.swiglu_backward(dgate, dup, dh, gate, up);
  }
  const Tensor x = rows_of(s.a, M, C);  // the dispatched rows again (dout is read)
  {
    MT_PROFILE("moe dispatch");
    be.gather_rows(x, n2, a.token_rows.rows_slice(0, M));
  }
  Tensor xe;
  {
    MT_PROFILE("moe all-to-all");
    xe = to_local_experts(be, rows_of(s.a, R, C), rows_of(s.b, R, C), x, r, a, par);  // dh is read
  }
  const Tensor dxe = rows_of(s.b, R, C);  // dh is read; without shards, dx itself
  {
    MT_PROFILE("moe experts backward");
    // The gates' products first, then the ups' adding to the same dx: each expert's dx sums its
    // terms in the order linear_layer_backward gave them one expert at a time.
    for (const ExpertProj p : {kExpertGate, kExpertUp}) {
      const Tensor& dy = p == kExpertGate ? dgate : dup;
      std::vector<ExpertLayer> group;
      for (int64_t j = 0; j < L; ++j)
        if (!no_rows(off, j))
          group.push_back(backward_layer(expert_rows(dxe, off, j), du(p, j), expert_rows(dy, off, j),
                                         expert_rows(xe, off, j), u(p, j), w.experts[size_t(j)][p]));
      expert_layers_backward(be, group, p == kExpertUp);
    }
  }
  Tensor dx = dxe;
  if (shards) {
    MT_PROFILE("moe all-to-all");
    // dx shares s.b with dxe: from_local_experts reads dxe (into s.a) before the exchange writes dx.
    dx = rows_of(s.b, M, C);
    from_local_experts(be, dx, rows_of(s.a, R, C), dxe, r, a, par);
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
  route_backward(dlogits.data(), r, dw.data(), routing_config(c), stats, loss.counted, c.aux_loss_coef(),
                 c.router_z_loss_coef, loss.loss_scale);
  const Tensor dlogits_f32 = rows_of(s.logits, N, E);
  be.copy_from_host(dlogits_f32, dlogits.data());
  // The router's products in the compute dtype, as every projection's (its gradient rounded once).
  Tensor dlogits_t = dlogits_f32;
  if (n2.dtype != DType::f32) {
    dlogits_t = rows_of(s.b, N, E);  // dx, summed into dn2 above
    be.convert(dlogits_t, dlogits_f32);
  }
  // Every tensor-parallel rank holds the whole router and computes the same term: one adds it
  // to dn2, a partial sum over the ranks (model/block.cpp).
  if (par.leads_tensor_group()) be.linear_backward_input(dn2, dlogits_t, w.router.W, 1.0f, true);
  if (w.router.dW) be.linear_backward_weight(w.router.dW, dlogits_t, n2);
}

}  // namespace mt
