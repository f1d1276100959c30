#include "model/block.h"

#include <algorithm>

#include "core/bf16.h"
#include "core/profile.h"
#include "kernels/cpu/columns.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/residual.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/swiglu.h"

namespace mt {

const char* proj_name(Proj p) {
  static const char* names[kNumProj] = {"q", "k", "v", "o", "gate", "up", "down"};
  return names[p];
}

std::pair<int64_t, int64_t> proj_dims(Proj p, const LlamaConfig& c) {
  const int64_t C = c.hidden_size, qd = c.q_dim(), kv = c.kv_dim(), I = c.intermediate_size;
  switch (p) {
    case kQ: return {qd, C};
    case kO: return {C, qd};
    case kK: case kV: return {kv, C};
    case kGate: case kUp: return {I, C};
    default: return {C, I};
  }
}

namespace {

// The widest per-token row a scratch buffer must hold.
int64_t widest(const LlamaConfig& c) { return std::max({c.hidden_size, c.q_dim(), c.intermediate_size}); }

}  // namespace

BlockActivationSizes block_activation_sizes(const LlamaConfig& c, int64_t lora_rank,
                                            const std::array<bool, kNumProj>& lora_on) {
  const int64_t C = c.hidden_size, qd = c.q_dim(), kv = c.kv_dim(), I = c.intermediate_size;
  int64_t t = 2 * C + 2 * qd + 2 * kv + 3 * I;  // n1 q k v att n2 gate up h
  for (int p = 0; p < kNumProj; ++p)
    if (lora_on[p]) t += lora_rank;
  int64_t f = 2 + c.num_attention_heads + C;  // rstd1 rstd2 lse x2
  return {t, f};
}

template <class T>
BlockActivations<T> carve_block_activations(T*& tc, float*& fc, int64_t N, const LlamaConfig& c,
                                            int64_t lora_rank,
                                            const std::array<bool, kNumProj>& lora_on) {
  const int64_t C = c.hidden_size, qd = c.q_dim(), kv = c.kv_dim(), I = c.intermediate_size;
  auto t = [&](int64_t per_token) { T* p = tc; tc += N * per_token; return p; };
  auto f = [&](int64_t per_token) { float* p = fc; fc += N * per_token; return p; };
  BlockActivations<T> a;
  a.n1 = t(C), a.q = t(qd), a.k = t(kv), a.v = t(kv), a.att = t(qd), a.n2 = t(C);
  a.gate = t(I), a.up = t(I), a.h = t(I);
  for (int p = 0; p < kNumProj; ++p) a.lora_u[p] = lora_on[p] ? t(lora_rank) : nullptr;
  a.rstd1 = f(1), a.rstd2 = f(1), a.lse = f(c.num_attention_heads), a.x2 = f(C);
  return a;
}

int64_t block_scratch_elems(const LlamaConfig& c, int64_t N, int64_t lora_rank) {
  const int64_t C = c.hidden_size, qd = c.q_dim(), kv = c.kv_dim(), wide = widest(c);
  return N * (3 * wide + C + qd + 4 * kv + std::max<int64_t>(lora_rank, 1));
}

template <class T>
BlockScratch<T> carve_block_scratch(T* base, const LlamaConfig& c, int64_t N, int64_t lora_rank) {
  const int64_t C = c.hidden_size, qd = c.q_dim(), kv = c.kv_dim(), wide = widest(c);
  BlockScratch<T> s;
  s.t0 = base, base += N * wide;
  s.t1 = base, base += N * wide;
  s.t2 = base, base += N * wide;
  s.t3 = base, base += N * C;
  s.t4 = base, base += N * kv;
  s.t5 = base, base += N * kv;
  s.qkv = base, base += N * (qd + 2 * kv);
  s.du = base;
  return s;
}

template <class T>
void fuse_qkv_if_adjacent(BlockWeights<T>& w, const LlamaConfig& c) {
  const int64_t C = c.hidden_size, qd = c.q_dim(), kv = c.kv_dim();
  const auto &q = w.proj[kQ], &k = w.proj[kK], &v = w.proj[kV];
  if (k.W != q.W + qd * C || v.W != k.W + kv * C) return;
  const bool grads_adjacent = q.dW ? (k.dW == q.dW + qd * C && v.dW == k.dW + kv * C)
                                   : (!k.dW && !v.dW);
  if (!grads_adjacent) return;
  w.qkv = q.W;
  w.dqkv = q.dW;
}

template <class T>
void block_forward(float* y, const float* x, BlockActivations<T>& a, const BlockWeights<T>& w,
                   const BlockInput& in, const LlamaConfig& c, BlockScratch<T>& s) {
  const int64_t N = in.B * in.T, C = c.hidden_size, qd = c.q_dim(), kv = c.kv_dim();
  const int64_t I = c.intermediate_size;
  const int64_t Hq = c.num_attention_heads, Hkv = c.num_key_value_heads, D = c.head_dim();
  auto proj = [&](Proj p, T* out, const T* inp) {
    static const char* names[kNumProj] = {"gemm fwd q", "gemm fwd k", "gemm fwd v", "gemm fwd o",
                                          "gemm fwd gate", "gemm fwd up", "gemm fwd down"};
    MT_PROFILE(names[p]);
    auto [o, i] = proj_dims(p, c);
    linear_layer_forward(out, a.lora_u[p], inp, w.proj[p], N, o, i);
  };
  // o and down under tensor parallelism: each rank holds some input columns, so its product is a
  // partial sum. The adapter's inner product x A^T is partial too and is summed before B applies
  // (B is whole on every rank), so the adapter adds its term once.
  auto row_parallel = [&](Proj p, T* out, const T* inp) {
    if (!in.partials) return proj(p, out, inp);
    const LinearWeights<T>& lw = w.proj[p];
    auto [o, i] = proj_dims(p, c);
    {
      MT_PROFILE(p == kO ? "gemm fwd o" : "gemm fwd down");
      linear_forward(out, inp, lw.W, N, o, i);
      if (lw.A) linear_forward(a.lora_u[p], inp, lw.A, N, lw.rank, i);
    }
    sum_partials(in.partials, out, N * o);
    if (!lw.A) return;
    sum_partials(in.partials, a.lora_u[p], N * lw.rank);
    MT_PROFILE(p == kO ? "gemm fwd o" : "gemm fwd down");
    linear_forward(out, a.lora_u[p], lw.B, N, o, lw.rank, lw.scale, /*accumulate=*/true);
  };

  {
    MT_PROFILE("rmsnorm forward");
    rmsnorm_forward(a.n1, a.rstd1, x, w.norm1, N, C, c.rms_norm_eps);
  }
  if (w.qkv) {
    MT_PROFILE("gemm fwd qkv");
    linear_forward(s.qkv, a.n1, w.qkv, N, qd + 2 * kv, C);
    split_columns<T>(s.qkv, N, {{a.q, qd}, {a.k, kv}, {a.v, kv}});
    lora_forward(a.q, a.lora_u[kQ], a.n1, w.proj[kQ], N, qd, C);
    lora_forward(a.k, a.lora_u[kK], a.n1, w.proj[kK], N, kv, C);
    lora_forward(a.v, a.lora_u[kV], a.n1, w.proj[kV], N, kv, C);
  } else {
    proj(kQ, a.q, a.n1);
    proj(kK, a.k, a.n1);
    proj(kV, a.v, a.n1);
  }
  {
    MT_PROFILE("rope forward");
    rope_forward(a.q, in.rope_cos, in.rope_sin, in.positions, N, Hq, D);
    rope_forward(a.k, in.rope_cos, in.rope_sin, in.positions, N, Hkv, D);
  }
  {
    MT_PROFILE("attention forward");
    attention_forward(a.att, a.lse, a.q, a.k, a.v, in.segments,
                      AttentionShape{in.B, in.T, Hq, Hkv, D});
  }
  row_parallel(kO, s.t0, a.att);
  {
    MT_PROFILE("residual/norm forward");
    residual_add(a.x2, x, s.t0, N * C);
    rmsnorm_forward(a.n2, a.rstd2, a.x2, w.norm2, N, C, c.rms_norm_eps);
  }
  proj(kGate, a.gate, a.n2);
  proj(kUp, a.up, a.n2);
  {
    MT_PROFILE("swiglu forward");
    swiglu_forward(a.h, a.gate, a.up, N * I);
  }
  row_parallel(kDown, s.t0, a.h);
  MT_PROFILE("residual/norm forward");
  residual_add(y, a.x2, s.t0, N * C);
}

template <class T>
void block_backward(float* dy, const float* x, const BlockActivations<T>& a,
                    const BlockWeights<T>& w, const BlockInput& in, const LlamaConfig& c,
                    BlockScratch<T>& s) {
  const int64_t N = in.B * in.T, C = c.hidden_size, qd = c.q_dim(), kv = c.kv_dim();
  const int64_t I = c.intermediate_size;
  const int64_t Hq = c.num_attention_heads, Hkv = c.num_key_value_heads, D = c.head_dim();
  auto proj_back = [&](Proj p, T* dinp, bool accumulate, const T* dout, const T* inp) {
    static const char* names[kNumProj] = {"gemm bwd q", "gemm bwd k", "gemm bwd v", "gemm bwd o",
                                          "gemm bwd gate", "gemm bwd up", "gemm bwd down"};
    MT_PROFILE(names[p]);
    auto [o, i] = proj_dims(p, c);
    linear_layer_backward(dinp, accumulate, s.du, dout, inp, a.lora_u[p], w.proj[p], N, o, i);
  };

  // MLP half: dy is dL/dy, which is also the residual path's share of dL/dx2.
  {
    MT_PROFILE("residual/norm backward");
    to_compute(s.t3, dy, N * C);
  }
  proj_back(kDown, s.t0, false, s.t3, a.h);                   // t0 = dh
  {
    MT_PROFILE("swiglu backward");
    swiglu_backward(s.t1, s.t2, s.t0, a.gate, a.up, N * I);   // t1 = dgate, t2 = dup
  }
  proj_back(kGate, s.t0, false, s.t1, a.n2);                  // t0 = dn2
  proj_back(kUp, s.t0, true, s.t2, a.n2);
  sum_partials(in.partials, s.t0, N * C);  // column-parallel: each rank's dn2 is a partial sum
  {
    MT_PROFILE("residual/norm backward");
    rmsnorm_backward(dy, w.dnorm2, s.t0, a.x2, w.norm2, a.rstd2, N, C);  // dy = dL/dx2
    to_compute(s.t3, dy, N * C);
  }

  // Attention half.
  proj_back(kO, s.t0, false, s.t3, a.att);                    // t0 = datt
  {
    MT_PROFILE("attention backward");
    attention_backward(s.t1, s.t4, s.t5, s.t0, a.att, a.lse, a.q, a.k, a.v, in.segments,
                       AttentionShape{in.B, in.T, Hq, Hkv, D});  // t1 = dq, t4 = dk, t5 = dv
  }
  {
    MT_PROFILE("rope backward");
    rope_backward(s.t1, in.rope_cos, in.rope_sin, in.positions, N, Hq, D);
    rope_backward(s.t4, in.rope_cos, in.rope_sin, in.positions, N, Hkv, D);
  }
  if (w.qkv) {
    MT_PROFILE("gemm bwd qkv");
    concat_columns<T>(s.qkv, N, {{s.t1, qd}, {s.t4, kv}, {s.t5, kv}});
    linear_backward_input(s.t0, s.qkv, w.qkv, N, qd + 2 * kv, C);  // t0 = dn1
    if (w.dqkv) linear_backward_weight(w.dqkv, s.qkv, a.n1, N, qd + 2 * kv, C);
    lora_backward(s.t0, s.du, s.t1, a.n1, a.lora_u[kQ], w.proj[kQ], N, qd, C);
    lora_backward(s.t0, s.du, s.t4, a.n1, a.lora_u[kK], w.proj[kK], N, kv, C);
    lora_backward(s.t0, s.du, s.t5, a.n1, a.lora_u[kV], w.proj[kV], N, kv, C);
  } else {
    proj_back(kQ, s.t0, false, s.t1, a.n1);                   // t0 = dn1
    proj_back(kK, s.t0, true, s.t4, a.n1);
    proj_back(kV, s.t0, true, s.t5, a.n1);
  }
  sum_partials(in.partials, s.t0, N * C);  // column-parallel: dn1 likewise
  MT_PROFILE("residual/norm backward");
  rmsnorm_backward(dy, w.dnorm1, s.t0, x, w.norm1, a.rstd1, N, C);  // dy = dL/dx
}

#define MT_INSTANTIATE(T)                                                                        \
  template BlockActivations<T> carve_block_activations<T>(T*&, float*&, int64_t,                 \
                                                          const LlamaConfig&, int64_t,           \
                                                          const std::array<bool, kNumProj>&);    \
  template BlockScratch<T> carve_block_scratch<T>(T*, const LlamaConfig&, int64_t, int64_t);     \
  template void fuse_qkv_if_adjacent<T>(BlockWeights<T>&, const LlamaConfig&);                   \
  template void block_forward<T>(float*, const float*, BlockActivations<T>&,                     \
                                 const BlockWeights<T>&, const BlockInput&, const LlamaConfig&,  \
                                 BlockScratch<T>&);                                              \
  template void block_backward<T>(float*, const float*, const BlockActivations<T>&,              \
                                  const BlockWeights<T>&, const BlockInput&, const LlamaConfig&, \
                                  BlockScratch<T>&);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16)
#undef MT_INSTANTIATE

}  // namespace mt
