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
  // Per expert row: gate up h (lora u x 3); per choice (k a token): out, weights, slots,
  // token_rows. Expert parallelism computes the rows in the order they arrive: no index of theirs.
  int64_t adapters = 0;
  for (bool on : experts_lora) adapters += on ? lora_rank : 0;
  return {k * C, 3 * k, 3 * I + adapters, 0};
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
  const int64_t ep = c.expert_shards() > 1 ? 3 * moe_row_width(c) : 0;  // MoeScratch::ep
  return R * (2 * moe_row_width(c) + 2 * c.moe_intermediate_size + std::max<int64_t>(lora_rank, 1) + ep);
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
  if (c.expert_shards() > 1) s.ep = t.take(1, 3 * R * W);
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

// Where the rows this rank's experts compute lie (MoeRouting::local_offsets): shard q's rows for
// local expert j are block q L + j, in the order the exchange delivers them (by source shard,
// then expert), this rank's own rows where its block falls. Computing in that order needs no
// reordering of the rows: a shard's block is one piece of a receive buffer, and the results go
// back in the order the rows came. Without expert parallelism: one shard, the routing's order.
struct LocalRows {
  const std::vector<int64_t>& off;
  int64_t L;
  int64_t begin(int64_t q, int64_t j) const { return off[size_t(q * L + j)]; }
  int64_t rows(int64_t q, int64_t j) const { return begin(q, j + 1) - begin(q, j); }
  int64_t shard_begin(int64_t q) const { return begin(q, 0); }
  int64_t shard_rows(int64_t q) const { return begin(q + 1, 0) - begin(q, 0); }
};

// Rows in that order held by `t` from row `first` on: a receive buffer (first 0, every shard's
// block where it arrives), or this rank's own block where the routing put it (first = where
// the block lies in the local order).
struct Placed {
  Tensor t;
  int64_t first = 0;
  Tensor rows(int64_t begin, int64_t n) const { return t.rows_slice(begin - first, n); }
};

// Rows [begin, + n) of a saved per-row tensor, or nothing where there is none (no adapter).
Tensor saved_rows(const Tensor& t, int64_t begin, int64_t n) { return t ? t.rows_slice(begin, n) : Tensor{}; }

// The first row of shard p's block in the routing's order (what this rank sends).
int64_t send_begin(const MoeRouting& r, int64_t p) {
  int64_t at = 0;
  for (int64_t i = 0; i < p; ++i) at += r.send_rows[size_t(i)];
  return at;
}

// What expert parallelism moves, decided once a forward: the rows this rank routed to each shard's
// experts (contiguous in the routing's expert order: shard p holds experts [p L, (p + 1) L)), the
// counts the shards exchange first, and where every shard's rows for this rank's experts lie
// among those it computes (LocalRows).
void plan_exchange(MoeRouting& r, const MoeActivations& a, const ModelConfig& c, ModelParallel& par) {
  const int64_t S = c.expert_shards(), L = c.local_experts();
  if (S == 1) {
    r.local_offsets = r.offsets;
    return;
  }
  std::vector<int64_t> counts(size_t(S * L)), got(size_t(S * L));
  for (int64_t e = 0; e < S * L; ++e) counts[size_t(e)] = r.offsets[size_t(e + 1)] - r.offsets[size_t(e)];
  par.exchange_expert_counts(counts.data(), got.data(), S * L);
  r.send_rows.assign(size_t(S), 0), r.recv_rows.assign(size_t(S), 0), r.local_offsets.assign(size_t(S * L + 1), 0);
  for (int64_t p = 0; p < S; ++p)
    for (int64_t j = 0; j < L; ++j) {
      const size_t b = size_t(p * L + j);
      r.send_rows[size_t(p)] += counts[b];
      r.recv_rows[size_t(p)] += got[b];
      r.local_offsets[b + 1] = r.local_offsets[b] + got[b];
    }
  MT_CHECK(r.local_offsets.back() <= a.gate.rows,
           "expert parallelism: more rows received than planned for (moe_expert_rows: every shard's choices, or "
           "what a capacity factor lets through)");
}

// Shard q's rows (x placed as LocalRows says) through gate and up (the products as one group,
// model/expert_products.h) and SwiGLU: the saved gate, up, h (and adapters' u) of those rows.
void experts_up(Backend& be, const LocalRows& at, int64_t q, const Placed& x, const MoeActivations& a,
                const MoeWeights& w) {
  std::vector<ExpertLayer> group;
  for (int64_t j = 0; j < at.L; ++j) {
    const int64_t b = at.begin(q, j), n = at.rows(q, j);
    if (n == 0) continue;
    const auto& ew = w.experts[size_t(j)];
    const Tensor xj = x.rows(b, n);
    group.push_back(forward_layer(a.gate.rows_slice(b, n), saved_rows(a.lora_u[kExpertGate], b, n), xj, ew[kExpertGate]));
    group.push_back(forward_layer(a.up.rows_slice(b, n), saved_rows(a.lora_u[kExpertUp], b, n), xj, ew[kExpertUp]));
  }
  expert_layers_forward(be, group);
  const int64_t b = at.shard_begin(q), n = at.shard_rows(q);
  if (n > 0) be.swiglu_forward(a.h.rows_slice(b, n), a.gate.rows_slice(b, n), a.up.rows_slice(b, n));
}

// Shard q's rows through down, into `out` (placed as LocalRows says).
void experts_down(Backend& be, const LocalRows& at, int64_t q, const Placed& out, const MoeActivations& a,
                  const MoeWeights& w, ModelParallel& par) {
  std::vector<ExpertLayer> group;
  for (int64_t j = 0; j < at.L; ++j) {
    const int64_t b = at.begin(q, j), n = at.rows(q, j);
    if (n > 0)
      group.push_back(forward_layer(out.rows(b, n), saved_rows(a.lora_u[kExpertDown], b, n), a.h.rows_slice(b, n),
                                    w.experts[size_t(j)][kExpertDown]));
  }
  expert_products_forward(be, group);
  expert_adapters_inner(be, group);
  // down is row-parallel under tensor parallelism: each rank's product is a partial sum (summed
  // after the combine, model/block.cpp), and so is an adapter's inner product, summed here
  // before B applies; B u is then added by one rank, so the sum over the ranks counts it once.
  const int64_t b = at.shard_begin(q), n = at.shard_rows(q);
  if (a.lora_u[kExpertDown] && n > 0) {
    par.reduce_sum(a.lora_u[kExpertDown].rows_slice(b, n));
    if (par.leads_tensor_group()) expert_adapters_outer(be, group);
  }
}

// An adapter's du scratch for local rows [b, + n), at those rows of the scratch: a projection's
// adapters run as groups (expert_layers_backward), so no two experts may share one.
Tensor adapter_scratch(const MoeScratch& s, const LinearWeights& w, int64_t b, int64_t n) {
  const int64_t r = std::max<int64_t>(w.rank(), 1);
  return s.du.flat_slice(b * r, n * r).view(n, r);
}

// Shard q's rows back through down (dout placed as LocalRows says; dh [R, I] in the local order)
// and SwiGLU: their dgate, dup. One group per shard: a group must not add to one weight's
// gradient twice (a device backend runs its products at once).
void experts_down_backward(Backend& be, const LocalRows& at, int64_t q, const Placed& dout, const Tensor& dh,
                           const Tensor& dgate, const Tensor& dup, const MoeActivations& a, const MoeWeights& w,
                           const MoeScratch& s) {
  std::vector<ExpertLayer> group;
  for (int64_t j = 0; j < at.L; ++j) {
    const int64_t b = at.begin(q, j), n = at.rows(q, j);
    if (n == 0) continue;
    const LinearWeights& lw = w.experts[size_t(j)][kExpertDown];
    group.push_back(backward_layer(dh.rows_slice(b, n), adapter_scratch(s, lw, b, n), dout.rows(b, n),
                                   a.h.rows_slice(b, n), saved_rows(a.lora_u[kExpertDown], b, n), lw));
  }
  expert_layers_backward(be, group, false);
  const int64_t b = at.shard_begin(q), n = at.shard_rows(q);
  if (n > 0)
    be.swiglu_backward(dgate.rows_slice(b, n), dup.rows_slice(b, n), dh.rows_slice(b, n), a.gate.rows_slice(b, n),
                       a.up.rows_slice(b, n));
}

// Shard q's rows back through gate and up: dx (placed as LocalRows says), x the rows the forward
// computed them from.
void experts_up_backward(Backend& be, const LocalRows& at, int64_t q, const Placed& x, const Placed& dx,
                         const Tensor& dgate, const Tensor& dup, const MoeActivations& a, const MoeWeights& w,
                         const MoeScratch& s) {
  // The gates' products first, then the ups' adding to the same dx: each expert's dx sums its
  // terms in the order linear_layer_backward gave them one expert at a time.
  for (const ExpertProj p : {kExpertGate, kExpertUp}) {
    const Tensor& dy = p == kExpertGate ? dgate : dup;
    std::vector<ExpertLayer> group;
    for (int64_t j = 0; j < at.L; ++j) {
      const int64_t b = at.begin(q, j), n = at.rows(q, j);
      if (n == 0) continue;
      const LinearWeights& lw = w.experts[size_t(j)][p];
      group.push_back(backward_layer(dx.rows(b, n), adapter_scratch(s, lw, b, n), dy.rows_slice(b, n), x.rows(b, n),
                                     saved_rows(a.lora_u[p], b, n), lw));
    }
    expert_layers_backward(be, group, p == kExpertUp);
  }
}

}  // namespace

void moe_forward(Backend& be, const Tensor& delta, const Tensor& n2, const MoeActivations& a,
                 const MoeWeights& w, const ModelConfig& c, const MoeScratch& s,
                 const MoeLossContext& loss, ModelParallel& par) {
  MT_CHECK(a.routing, "moe_forward without a routing record");
  const int64_t N = n2.rows, C = c.hidden_size, E = c.num_experts, L = c.local_experts();
  const int64_t S = c.expert_shards();
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
    plan_exchange(r, a, c, par);
  }
  const int64_t M = r.rows();
  const LocalRows at{r.local_offsets, L};
  const Tensor x = rows_of(s.a, M, C);
  {
    MT_PROFILE("moe dispatch");
    be.gather_rows(x, n2, a.token_rows.rows_slice(0, M));
  }
  const Tensor out = a.out.rows_slice(0, M);
  if (S == 1) {
    MT_PROFILE("moe experts");
    experts_up(be, at, 0, Placed{x, 0}, a, w);
    experts_down(be, at, 0, Placed{out, 0}, a, w, par);
  } else {
    // Expert parallelism, overlapped: the rows this rank routed to its own experts need no
    // exchange, so they go through gate, up and SwiGLU while the others' rows travel, and
    // through down while the results travel back; what arrived is computed in between, in the
    // order it arrived, and its results sent back from where its rows were.
    const int64_t me = c.moe_expert_begin / L, own = r.send_rows[size_t(me)];
    const Placed own_x{x.rows_slice(send_begin(r, me), own), at.shard_begin(me)};
    const Placed own_out{out.rows_slice(send_begin(r, me), own), at.shard_begin(me)};
    const Tensor via = rows_of(s.b, r.received(), C);
    auto arriving = par.start_expert_rows(via, r.recv_rows, x, r.send_rows);
    {
      MT_PROFILE("moe experts");
      experts_up(be, at, me, own_x, a, w);
    }
    arriving->wait();
    {
      MT_PROFILE("moe experts");
      for (int64_t q = 0; q < S; ++q)
        if (q != me) experts_up(be, at, q, Placed{via, 0}, a, w);
      for (int64_t q = 0; q < S; ++q)  // over the rows they came from (read above)
        if (q != me) experts_down(be, at, q, Placed{via, 0}, a, w, par);
    }
    auto returning = par.start_expert_rows(out, r.send_rows, via, r.recv_rows);
    {
      MT_PROFILE("moe experts");
      experts_down(be, at, me, own_out, a, w, par);
    }
    returning->wait();
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
  const int64_t S = c.expert_shards();
  const LocalRows at{r.local_offsets, L};
  const Tensor out = a.out.rows_slice(0, M);
  const Tensor dweights = rows_of(s.dweights, N * k, 1);
  const Tensor dout = rows_of(s.a, M, C);
  {
    MT_PROFILE("moe combine backward");
    be.combine_rows_backward(dout, dweights, ddelta, out, a.slots, a.weights, k);
    // Under tensor parallelism `out` is this rank's partial sum: so is each weight's gradient
    // (a dot product with it), summed here to the whole one every rank routes with.
    par.reduce_sum(dweights);
  }
  // The router's gradient (its backward on the host), rounded once to the compute dtype in
  // `buf` (as every projection's) when that is not f32.
  auto router_gradient = [&](const Tensor& buf) {
    std::vector<float> dw(size_t(N * k)), dlogits(size_t(N * E));
    be.copy_to_host(dw.data(), dweights);
    static const MoeBalanceStats kNone;
    const MoeBalanceStats& stats = loss.stats ? *loss.stats : kNone;
    route_backward(dlogits.data(), r, dw.data(), routing_config(c), stats, loss.counted, c.aux_loss_coef(),
                   c.router_z_loss_coef, loss.loss_scale);
    const Tensor dlogits_f32 = rows_of(s.logits, N, E);
    be.copy_from_host(dlogits_f32, dlogits.data());
    if (n2.dtype == DType::f32) return dlogits_f32;
    const Tensor t = rows_of(buf, N, E);
    be.convert(t, dlogits_f32);
    return t;
  };
  const Tensor dgate = rows_of(s.dgate, R, I), dup = rows_of(s.dup, R, I);
  Tensor dx, dlogits;  // dx [M, C]: the dispatched rows' gradients, in the routing's order
  if (S == 1) {
    const Tensor dh = rows_of(s.b, R, I);
    {
      MT_PROFILE("moe experts backward");
      experts_down_backward(be, at, 0, Placed{dout, 0}, dh, dgate, dup, a, w, s);
    }
    const Tensor x = rows_of(s.a, M, C);  // the dispatched rows again (dout is read)
    {
      MT_PROFILE("moe dispatch");
      be.gather_rows(x, n2, a.token_rows.rows_slice(0, M));
    }
    dx = rows_of(s.b, M, C);  // dh is read
    {
      MT_PROFILE("moe experts backward");
      experts_up_backward(be, at, 0, Placed{x, 0}, Placed{dx, 0}, dgate, dup, a, w, s);
    }
  } else {
    // Expert parallelism, overlapped as the forward: both exchanges the backward needs (dout, and
    // the dispatched rows again, not kept from the forward) leave at once, this rank's own rows go
    // all the way back to their dx meanwhile, the others' through down and SwiGLU as soon as
    // their dout is in, through gate and up once their rows are; the router's gradient is made
    // while the dx travel back. MoeScratch::ep holds the rows sent, those received and dh.
    const int64_t me = c.moe_expert_begin / L, own = r.send_rows[size_t(me)];
    const int64_t third = s.ep.numel() / 3;
    const Tensor x = rows_of(s.ep.flat_slice(0, third), M, C);
    const Tensor via_x = rows_of(s.ep.flat_slice(third, third), R, C);
    const Tensor dh = rows_of(s.ep.flat_slice(2 * third, third), R, I);
    const Tensor via = rows_of(s.b, R, C);
    {
      MT_PROFILE("moe dispatch");
      be.gather_rows(x, n2, a.token_rows.rows_slice(0, M));
    }
    auto douts = par.start_expert_rows(via, r.recv_rows, dout, r.send_rows);
    auto xs = par.start_expert_rows(via_x, r.recv_rows, x, r.send_rows);
    {
      MT_PROFILE("moe experts backward");
      // The own rows' dx over their dout (read first): dout becomes dx, in the routing's order.
      const Placed own_dout{dout.rows_slice(send_begin(r, me), own), at.shard_begin(me)};
      experts_down_backward(be, at, me, own_dout, dh, dgate, dup, a, w, s);
      experts_up_backward(be, at, me, Placed{x.rows_slice(send_begin(r, me), own), at.shard_begin(me)}, own_dout,
                          dgate, dup, a, w, s);
    }
    douts->wait();
    {
      MT_PROFILE("moe experts backward");
      for (int64_t q = 0; q < S; ++q)
        if (q != me) experts_down_backward(be, at, q, Placed{via, 0}, dh, dgate, dup, a, w, s);
    }
    xs->wait();
    {
      MT_PROFILE("moe experts backward");
      for (int64_t q = 0; q < S; ++q)  // dx over the dout they came from (read above)
        if (q != me) experts_up_backward(be, at, q, Placed{via_x, 0}, Placed{via, 0}, dgate, dup, a, w, s);
    }
    dx = dout;
    auto returning = par.start_expert_rows(dx, r.send_rows, via, r.recv_rows);
    {
      MT_PROFILE("moe router backward");
      dlogits = router_gradient(s.ep.flat_slice(third, third));  // via_x: its rows are read
      if (w.router.dW) be.linear_backward_weight(w.router.dW, dlogits, n2);
    }
    returning->wait();
  }
  {
    MT_PROFILE("moe combine backward");
    be.combine_rows(dn2, dx, a.slots, Tensor{}, k, false);  // each token's k copies summed
  }
  MT_PROFILE("moe router backward");
  if (S == 1) dlogits = router_gradient(s.b);  // dx, summed into dn2 above
  // Every tensor-parallel rank holds the whole router and computes the same term: one adds it
  // to dn2, a partial sum over the ranks (model/block.cpp).
  if (par.leads_tensor_group()) be.linear_backward_input(dn2, dlogits, w.router.W, 1.0f, true);
  if (S == 1 && w.router.dW) be.linear_backward_weight(w.router.dW, dlogits, n2);
}

}  // namespace mt
