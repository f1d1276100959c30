#include "model/block.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "core/bf16.h"
#include "core/profile.h"
#include "model/split_qk_norm.h"

namespace mt {

const char* proj_name(Proj p) {
  static const char* names[kNumProj] = {"q", "k", "v", "o", "gate", "up", "down"};
  return names[p];
}

std::pair<int64_t, int64_t> proj_dims(Proj p, const ModelConfig& c) {
  const int64_t C = c.hidden_size, qd = c.q_dim(), kv = c.kv_dim(), I = c.intermediate_size;
  switch (p) {
    case kQ: return {qd, C};
    case kO: return {C, qd};
    case kK: case kV: return {kv, C};
    case kGate: case kUp: return {I, C};
    default: return {C, I};
  }
}

bool proj_exists(Proj p, const ModelConfig& c) { return !(p == kGate && c.gelu_mlp()); }

bool proj_has_bias(Proj p, const ModelConfig& c) {
  switch (p) {
    case kQ: case kK: case kV: return c.qkv_bias;
    case kO: return c.o_bias;
    default: return c.mlp_bias;
  }
}

namespace {

// Whether some layer has the dense MLP (every layer of a dense model; an MoE model's
// mlp_only_layers and those decoder_sparse_step skips).
bool has_dense_mlp(const ModelConfig& c) {
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    if (!c.moe_layer(l)) return true;
  return false;
}

// Whether projection p is some layer's (an MoE model without a dense layer has no gate, up or
// down of its own: its experts have them).
bool dense_proj_used(Proj p, const ModelConfig& c) {
  return proj_exists(p, c) && (p < kGate || has_dense_mlp(c));
}

// The experts' projections that have adapters: lora.targets' gate, up and down.
std::array<bool, kNumExpertProj> expert_lora(const std::array<bool, kNumProj>& lora_on) {
  return {lora_on[kGate], lora_on[kUp], lora_on[kDown]};
}

// The widest per-token row a scratch buffer must hold.
int64_t widest(const ModelConfig& c) { return std::max({c.hidden_size, c.q_dim(), c.intermediate_size}); }

// Each projection's LoRA dropout in this pass: null where there is none.
class LoraDropouts {
 public:
  LoraDropouts(const BlockInput& in, const BlockScratch& s) : on_(in.lora_dropout != nullptr) {
    if (!on_) return;
    for (int p = 0; p < kNumProj; ++p) d_[size_t(p)] = {(*in.lora_dropout)[size_t(p)], s.dropped};
  }
  const AdapterDropout* operator[](Proj p) const { return on_ ? &d_[size_t(p)] : nullptr; }

 private:
  bool on_;
  std::array<AdapterDropout, kNumProj> d_{};
};

// Projections that read one input, as lora_group_* (model/linear.h) take them.
struct ProjGroup {
  ProjGroup(std::initializer_list<Proj> ps, const BlockWeights& w, const LoraDropouts& drops) {
    for (Proj p : ps) ws[n] = &w.proj[p], ds[n] = drops[p], ++n;
  }
  LoraGroup group() const { return {{ws.data(), n}, {ds.data(), n}}; }
  std::array<const LinearWeights*, 3> ws{};
  std::array<const AdapterDropout*, 3> ds{};
  size_t n = 0;
};

// OLMoE's q/k norm on one share of the heads (model/split_qk_norm.h).
bool split_qk_norm(const ModelConfig& c) { return c.qk_norm && c.qk_norm_whole && c.head_shards > 1; }
}  // namespace

BlockActivationSizes block_activation_sizes(const ModelConfig& c, int64_t lora_rank,
                                            const std::array<bool, kNumProj>& lora_on) {
  const int64_t C = c.hidden_size, qd = c.q_dim(), kv = c.kv_dim(), I = c.intermediate_size;
  const bool dense = has_dense_mlp(c);
  int64_t t = 2 * C + 2 * qd + 2 * kv + (dense ? (c.gelu_mlp() ? 2 : 3) * I : 0);  // n1 q k v att n2 (gate) up h
  for (int p = 0; p < kNumProj; ++p)
    if (lora_on[p] && dense_proj_used(Proj(p), c)) t += lora_rank;
  const MoeActivationSizes moe = moe_activation_sizes(c, lora_rank, expert_lora(lora_on));
  t += moe.t_elems;
  int64_t f = 2 * norm_saved_per_token(c) + c.num_attention_heads + C + moe.f_elems;  // rstd1 rstd2 (mean1 mean2) lse x2
  if (c.qk_norm) f += qd + kv + c.num_attention_heads + c.num_key_value_heads;  // q_raw k_raw rstd_q rstd_k
  if (c.post_norms) f += 2 * C + 2;  // attn_raw mlp_raw rstd_post_attn rstd_post_mlp
  // On the residual stream's rows: n1 n2; rstd1 rstd2 (mean1 mean2) x2 (the post norms' four).
  const int64_t f_split = 2 * norm_saved_per_token(c) + C + (c.post_norms ? 2 * C + 2 : 0);
  return {t, f, 2 * C, f_split, moe.t_per_expert_row, moe.f_per_expert_row};
}

BlockActivations carve_block_activations(ArenaCursor& t, ArenaCursor& f, int64_t N,
                                         const ModelConfig& c, int64_t lora_rank,
                                         const std::array<bool, kNumProj>& lora_on,
                                         int64_t residual_rows) {
  const int64_t C = c.hidden_size, qd = c.q_dim(), kv = c.kv_dim(), I = c.intermediate_size;
  const int64_t R = residual_rows > 0 ? residual_rows : N;
  BlockActivations a;
  a.n1 = t.take(R, C), a.q = t.take(N, qd), a.k = t.take(N, kv), a.v = t.take(N, kv);
  a.att = t.take(N, qd), a.n2 = t.take(R, C);
  if (has_dense_mlp(c)) {
    if (!c.gelu_mlp()) a.gate = t.take(N, I);
    a.up = t.take(N, I), a.h = t.take(N, I);
  }
  for (int p = 0; p < kNumProj; ++p)
    a.lora_u[p] = lora_on[p] && dense_proj_used(Proj(p), c) ? t.take(N, lora_rank) : Tensor{};
  a.moe = carve_moe_activations(t, f, N, c, lora_rank, expert_lora(lora_on));
  a.rstd1 = f.take(R, 1), a.rstd2 = f.take(R, 1), a.lse = f.take(N, c.num_attention_heads);
  if (c.layer_norm()) a.mean1 = f.take(R, 1), a.mean2 = f.take(R, 1);
  a.x2 = f.take(R, C);
  if (c.qk_norm) {
    a.q_raw = f.take(N, qd), a.k_raw = f.take(N, kv);
    if (split_qk_norm(c))  // one buffer of q's row statistics then k's, summed over tp at once (>= 2N)
      a.rstd_q = f.take(N, c.num_attention_heads + c.num_key_value_heads);
    else
      a.rstd_q = f.take(N, c.num_attention_heads), a.rstd_k = f.take(N, c.num_key_value_heads);
  }
  if (c.post_norms) {
    a.attn_raw = f.take(R, C), a.mlp_raw = f.take(R, C);
    a.rstd_post_attn = f.take(R, 1), a.rstd_post_mlp = f.take(R, 1);
  }
  return a;
}

int64_t block_scratch_elems(const ModelConfig& c, int64_t N, int64_t lora_rank, bool lora_dropout,
                            bool sequence_split) {
  const int64_t C = c.hidden_size, qd = c.q_dim(), kv = c.kv_dim(), wide = widest(c);
  return N * ((lora_dropout ? 4 : 3) * wide + (sequence_split ? 2 : 1) * C + qd + 4 * kv +
              std::max<int64_t>(lora_rank, 1)) +
         lora_group_scratch_elems(N, C, lora_rank, 3) + moe_scratch_elems(c, N, lora_rank);
}

BlockScratch carve_block_scratch(const Tensor& arena, const ModelConfig& c, int64_t N,
                                 int64_t lora_rank, bool lora_dropout, bool sequence_split) {
  const int64_t C = c.hidden_size, qd = c.q_dim(), kv = c.kv_dim(), wide = widest(c);
  ArenaCursor cur(arena);
  BlockScratch s;
  s.t0 = cur.take(1, N * wide), s.t1 = cur.take(1, N * wide), s.t2 = cur.take(1, N * wide);
  s.t3 = cur.take(1, N * C);
  s.t4 = cur.take(1, N * kv), s.t5 = cur.take(1, N * kv);
  s.qkv = cur.take(1, N * (qd + 2 * kv));
  s.du = cur.take(1, N * std::max<int64_t>(lora_rank, 1));
  if (lora_dropout) s.dropped = cur.take(1, N * wide);
  // Beside dropout too: a pass without noise (evaluation) then batches the adapters as a model
  // without dropout does, so its numbers are the same bits.
  if (lora_rank > 0) s.lora_group = cur.take(1, lora_group_scratch_elems(N, C, lora_rank, 3));
  if (sequence_split) s.whole = cur.take(1, N * C);
  s.moe = carve_moe_scratch(cur, c, N, lora_rank);
  return s;
}

int64_t block_scratch_f32_elems(const ModelConfig& c, int64_t N) {
  return (c.qk_norm ? N * c.q_dim() + c.q_norm_width() : 0) + (split_qk_norm(c) ? 2 * N + c.k_norm_width() : 0) +
         (c.post_norms ? N * c.hidden_size : 0) + moe_scratch_f32_elems(c, N);
}

void carve_block_scratch_f32(BlockScratch& s, ArenaCursor& f32, const ModelConfig& c, int64_t N) {
  if (c.qk_norm) {
    s.dqk_raw = f32.take(1, N * c.q_dim());
    // >= the k norm's; split, both side by side (one sum over tp: model/split_qk_norm.h)
    s.dnorm_part = f32.take(1, c.q_norm_width() + (split_qk_norm(c) ? c.k_norm_width() : 0));
  }
  if (split_qk_norm(c)) s.dnorm_rows = f32.take(1, 2 * N);  // q's rows, then k's
  if (c.post_norms) s.dpost_raw = f32.take(1, N * c.hidden_size);
  carve_moe_scratch_f32(s.moe, f32, c, N);
}

float embedding_scale(const ModelConfig& c, DType compute) {
  if (!c.scale_embeddings) return 1.0f;
  const float s = float(std::sqrt(double(c.hidden_size)));
  return compute == DType::bf16 ? to_float(float_to_bf16(s)) : s;
}

namespace {

// Sequence parallelism's two moves at the edges of a tensor-parallel region (ModelParallel's
// gather_rows and sum_scatter_rows), and plain tensor parallelism's when the rows are not split.
class SequenceRows {
 public:
  SequenceRows(ModelParallel& par, int64_t N)
      : par_(par), shards_(par.sequence_shards()), rows_(N / shards_), first_(par.sequence_shard() * rows_) {
    MT_CHECK(N % shards_ == 0, "sequence parallelism: the rows do not divide over the ranks");
  }
  int64_t rows() const { return rows_; }  // of the residual stream this rank holds
  // A region's input whole: `part` itself, or every rank's share gathered into `into`.
  Tensor whole(const Tensor& part, const Tensor& into) const {
    if (shards_ == 1) return part;
    const Tensor w = rows_of(into, part.rows * shards_, part.cols);
    par_.gather_rows(w, part);
    return w;
  }
  // A region's partial output summed over the ranks: in place, or this rank's rows into `into`.
  Tensor sum(const Tensor& partial, const Tensor& into) const {
    if (shards_ == 1) {
      par_.reduce_sum(partial);
      return partial;
    }
    const Tensor part = rows_of(into, rows_, partial.cols);
    par_.sum_scatter_rows(part, partial);
    return part;
  }
  // This rank's rows of a tensor whole on every rank (empty stays empty).
  Tensor own(const Tensor& whole) const {
    return shards_ == 1 || !whole ? whole : whole.rows_slice(first_, rows_);
  }

 private:
  ModelParallel& par_;
  int64_t shards_, rows_, first_;
};

// Qwen3's q/k norm: an RMSNorm over each head's D values, the rows of x viewed [N * heads, D].
// x (compute dtype) is widened into `raw` (f32, saved) and normalised back into x.
// OLMoE's (ModelConfig::qk_norm_whole): one group a row, D its whole width; `rstd` then uses its
// first x.rows entries.
void head_norm_forward(Backend& be, const Tensor& x, const Tensor& raw, const Tensor& rstd,
                       const Tensor& w, int64_t heads, int64_t D, const ModelConfig& c) {
  const int64_t rows = x.rows * heads;
  be.convert(raw, x);
  be.rmsnorm_forward(x.view(rows, D), rstd.flat_slice(0, rows).view(rows, 1), raw.view(rows, D), w,
                     c.rms_norm_eps, c.norm_weight_offset);
}

// On entry dx holds the gradient of the normalised x; on exit that of x before the norm. The
// weight's gradient is summed over the tensor-parallel ranks (each holds some of the heads)
// before it is added to dw, which may hold earlier micro-batches' sums.
void head_norm_backward(Backend& be, ModelParallel& par, const Tensor& dx, const Tensor& raw,
                        const Tensor& rstd, const Tensor& w, const Tensor& dw, int64_t heads,
                        int64_t D, const BlockScratch& s, float offset) {
  const int64_t rows = dx.rows * heads;
  const Tensor draw = s.dqk_raw.flat_slice(0, rows * D).view(rows, D);
  be.fill(draw, 0.0f);  // rmsnorm_backward accumulates
  const Tensor part = dw ? s.dnorm_part.flat_slice(0, D).view(1, D) : Tensor{};
  if (part) be.fill(part, 0.0f);
  be.rmsnorm_backward(draw, part, dx.view(rows, D), raw.view(rows, D), w,
                      rstd.flat_slice(0, rows).view(rows, 1), offset);
  be.convert(dx, draw.view(dx.rows, dx.cols));
  if (!part) return;
  par.reduce_sum(part);
  be.add(dw, part);
}

// Gemma's norm on a sublayer's output (compute dtype, whole on every rank: after the row-parallel
// sum), in place: widened into `raw` (f32, saved) and normalised back into out.
void post_norm_forward(Backend& be, const Tensor& out, const Tensor& raw, const Tensor& rstd,
                       const NormWeights& w, const ModelConfig& c) {
  MT_CHECK(!c.layer_norm(), "post norms are RMSNorms (Gemma 3): no LayerNorm mean is saved");
  be.convert(raw, out);
  norm_forward(be, c, out, Tensor{}, rstd, raw, w);
}

// d_out (compute dtype) = the gradient of the output before the norm, from dy (f32, the gradient
// of the normalised output). The weight's gradient is every rank's own: its input is whole.
void post_norm_backward(Backend& be, const Tensor& d_out, const Tensor& dy, const Tensor& raw,
                        const Tensor& rstd, const NormWeights& w, const ModelConfig& c,
                        const BlockScratch& s) {
  const Tensor draw = rows_of(s.dpost_raw, dy.rows, dy.cols);
  be.fill(draw, 0.0f);  // norm_backward accumulates
  norm_backward(be, c, draw, dy, raw, w, Tensor{}, rstd);
  be.convert(d_out, draw);
}

}  // namespace

void fuse_qkv_if_adjacent(BlockWeights& w, const ModelConfig& c) {
  const int64_t C = c.hidden_size, qd = c.q_dim(), kv = c.kv_dim();
  const auto &q = w.proj[kQ], &k = w.proj[kK], &v = w.proj[kV];
  // By bytes, so NF4 projections (row records of the same width) fuse as bf16 ones do.
  auto follows = [](const Tensor& next, const Tensor& prev, int64_t elems) {
    return prev.numel() == elems && next.data == static_cast<char*>(prev.data) + prev.bytes();
  };
  if (!follows(k.W, q.W, qd * C) || !follows(v.W, k.W, kv * C)) return;
  const bool grads_adjacent = q.dW ? (follows(k.dW, q.dW, qd * C) && follows(v.dW, k.dW, kv * C))
                                   : (!k.dW && !v.dW);
  if (!grads_adjacent) return;
  w.qkv = Tensor(q.W.data, q.W.dtype, qd + 2 * kv, C, q.W.device);
  if (q.dW) w.dqkv = Tensor(q.dW.data, q.dW.dtype, qd + 2 * kv, C, q.dW.device);
}

void block_forward(Backend& be, const Tensor& y, const Tensor& x, const BlockActivations& a,
                   const BlockWeights& w, const BlockInput& in, const ModelConfig& c,
                   const BlockScratch& s, const KvCache* cache) {
  const int64_t N = in.B * in.T, C = c.hidden_size;
  const int64_t Hq = c.num_attention_heads, Hkv = c.num_key_value_heads, D = c.head_dim();
  ModelParallel& par = *in.parallel;
  const SequenceRows seq(par, N);
  const LoraDropouts drops(in, s);
  auto proj = [&](Proj p, const Tensor& out, const Tensor& inp) {
    static const char* names[kNumProj] = {"gemm fwd q", "gemm fwd k", "gemm fwd v", "gemm fwd o",
                                          "gemm fwd gate", "gemm fwd up", "gemm fwd down"};
    {
      MT_PROFILE(names[p]);
      be.linear_forward(out, inp, w.proj[p].W);
      bias_forward(be, out, w.proj[p]);
    }
    MT_PROFILE("lora adapters");  // the adapter's own row in the bench's breakdown
    lora_forward(be, out, a.lora_u[p], inp, w.proj[p], drops[p]);
  };
  auto base = [&](Proj p, const Tensor& out, const Tensor& inp) {  // without the adapter
    static const char* names[kNumProj] = {"gemm fwd q", "gemm fwd k", "gemm fwd v", "gemm fwd o",
                                          "gemm fwd gate", "gemm fwd up", "gemm fwd down"};
    MT_PROFILE(names[p]);
    be.linear_forward(out, inp, w.proj[p].W);
    bias_forward(be, out, w.proj[p]);
  };
  // o and down are row-parallel under tensor parallelism: each rank holds some input columns, so
  // its product is a partial sum. The adapter's inner product x A^T is partial too and is summed
  // before B applies (B is whole on every rank), so the adapter adds its term once. Returns the
  // summed output (this rank's rows of it under sequence parallelism).
  auto row_parallel = [&](Proj p, const Tensor& inp) {
    const LinearWeights& lw = w.proj[p];
    const Tensor partial = rows_of(s.t0, N, C);
    {
      MT_PROFILE(p == kO ? "gemm fwd o" : "gemm fwd down");
      be.linear_forward(partial, inp, lw.W);
    }
    {
      MT_PROFILE("lora adapters");
      lora_inner(be, a.lora_u[p], inp, lw, drops[p]);
    }
    const Tensor out = seq.sum(partial, s.t3);
    if (lw.A) par.reduce_sum(a.lora_u[p]);
    {
      MT_PROFILE(p == kO ? "gemm fwd o" : "gemm fwd down");
      bias_forward(be, out, lw);  // once, after the sum (Megatron): every rank holds the whole bias
    }
    MT_PROFILE("lora adapters");
    lora_outer(be, out, seq.own(a.lora_u[p]), lw);
    return out;
  };

  {
    MT_PROFILE("rmsnorm forward");
    norm_forward(be, c, a.n1, a.mean1, a.rstd1, x, w.norm1);
  }
  const Tensor n1 = seq.whole(a.n1, s.whole);
  // q, k and v's adapters as one product where they can (model/linear.h, lora_group_*).
  const ProjGroup qkv_lora({kQ, kK, kV}, w, drops);
  const bool qkv_batched = lora_group_batches(qkv_lora.group(), s.lora_group, N);
  if (w.qkv) {
    {
      MT_PROFILE("gemm fwd qkv");
      const Tensor qkv = rows_of(s.qkv, N, w.qkv.rows);
      be.linear_forward(qkv, n1, w.qkv);
      const Tensor parts[] = {a.q, a.k, a.v};
      be.split_columns(qkv, parts);
      bias_forward(be, a.q, w.proj[kQ]);
      bias_forward(be, a.k, w.proj[kK]);
      bias_forward(be, a.v, w.proj[kV]);
    }
    if (!qkv_batched) {
      MT_PROFILE("lora adapters");
      lora_forward(be, a.q, a.lora_u[kQ], n1, w.proj[kQ], drops[kQ]);
      lora_forward(be, a.k, a.lora_u[kK], n1, w.proj[kK], drops[kK]);
      lora_forward(be, a.v, a.lora_u[kV], n1, w.proj[kV], drops[kV]);
    }
  } else if (qkv_batched) {
    base(kQ, a.q, n1);
    base(kK, a.k, n1);
    base(kV, a.v, n1);
  } else {
    proj(kQ, a.q, n1);
    proj(kK, a.k, n1);
    proj(kV, a.v, n1);
  }
  if (qkv_batched) {
    MT_PROFILE("lora adapters");
    const Tensor ys[] = {a.q, a.k, a.v}, us[] = {a.lora_u[kQ], a.lora_u[kK], a.lora_u[kV]};
    lora_group_forward(be, ys, us, n1, qkv_lora.group(), s.lora_group);
  }
  if (split_qk_norm(c)) {
    MT_PROFILE("q/k norm forward");
    split_qk_norm_forward(be, par, {a.q, a.q_raw, w.q_norm, {}}, {a.k, a.k_raw, w.k_norm, {}}, a.rstd_q, c);
  } else if (c.qk_norm) {
    MT_PROFILE("q/k norm forward");
    const int64_t qg = c.qk_norm_whole ? 1 : Hq, kg = c.qk_norm_whole ? 1 : Hkv;  // groups a row
    head_norm_forward(be, a.q, a.q_raw, a.rstd_q, w.q_norm, qg, a.q.cols / qg, c);
    head_norm_forward(be, a.k, a.k_raw, a.rstd_k, w.k_norm, kg, a.k.cols / kg, c);
  }
  if (!c.learned_positions()) {
    const Tensor& rope_cos = w.local_rope ? in.rope_local_cos : in.rope_cos;
    const Tensor& rope_sin = w.local_rope ? in.rope_local_sin : in.rope_sin;
    MT_PROFILE("rope forward");
    be.rope_forward(a.q, rope_cos, rope_sin, in.positions, Hq);
    be.rope_forward(a.k, rope_cos, rope_sin, in.positions, Hkv);
  }
  if (cache) {
    MT_PROFILE("attention forward");
    be.convert(cache->k.rows_slice(cache->position, 1), a.k);
    be.convert(cache->v.rows_slice(cache->position, 1), a.v);
    // A window keeps the last `window` positions: the cache rows from `first` on.
    const int64_t len = cache->position + 1;
    const int64_t first = w.window > 0 ? std::max<int64_t>(0, len - w.window) : 0;
    be.decode_attention(a.att, a.q, cache->k.rows_slice(first, len - first),
                        cache->v.rows_slice(first, len - first), len - first, Hq, Hkv,
                        c.attention_scale);
  } else {
    MT_PROFILE("attention forward");
    const AttentionDims dims{in.B, in.T, Hq, Hkv, D, w.window, 1, 0, c.attention_scale};
    if (in.context) in.context->attention_forward(a.att, a.lse, a.q, a.k, a.v, in.segments, dims);
    else be.attention_forward(a.att, a.lse, a.q, a.k, a.v, in.segments, dims);
  }
  const Tensor attn_out = row_parallel(kO, a.att);
  {
    MT_PROFILE("residual/norm forward");
    if (c.post_norms) post_norm_forward(be, attn_out, a.attn_raw, a.rstd_post_attn, w.post_attn_norm, c);
    residual_norm_forward(be, c, a.x2, a.n2, a.mean2, a.rstd2, x, attn_out, w.norm2);  // one pass (norm.h)
  }
  const Tensor n2 = seq.whole(a.n2, s.whole);
  if (w.moe) {  // a mixture-of-experts layer (model/moe.h)
    // Under tensor parallelism each rank computes its columns of every expert: its combined
    // output is a partial sum, summed like the MLP's down product (this rank's rows of it under
    // sequence parallelism).
    const Tensor partial = rows_of(s.t0, N, C);
    moe_forward(be, partial, n2, a.moe, w.moe, c, s.moe, in.moe_loss, par);
    const Tensor delta = seq.sum(partial, s.t3);
    MT_PROFILE("residual/norm forward");
    if (c.post_norms) post_norm_forward(be, delta, a.mlp_raw, a.rstd_post_mlp, w.post_mlp_norm, c);
    be.residual_add(y, a.x2, delta);
    return;
  }
  if (c.gelu_mlp()) {
    proj(kUp, a.up, n2);
    MT_PROFILE("gelu forward");
    be.gelu_forward(a.h, a.up);
  } else {
    const ProjGroup gate_up({kGate, kUp}, w, drops);  // gate and up's adapters as one product
    if (lora_group_batches(gate_up.group(), s.lora_group, N)) {
      base(kGate, a.gate, n2);
      base(kUp, a.up, n2);
      MT_PROFILE("lora adapters");
      const Tensor ys[] = {a.gate, a.up}, us[] = {a.lora_u[kGate], a.lora_u[kUp]};
      lora_group_forward(be, ys, us, n2, gate_up.group(), s.lora_group);
    } else {
      proj(kGate, a.gate, n2);
      proj(kUp, a.up, n2);
    }
    if (c.geglu) {
      MT_PROFILE("geglu forward");
      be.geglu_forward(a.h, a.gate, a.up);
    } else {
      MT_PROFILE("swiglu forward");
      be.swiglu_forward(a.h, a.gate, a.up);
    }
  }
  const Tensor delta = row_parallel(kDown, a.h);
  MT_PROFILE("residual/norm forward");
  if (c.post_norms) post_norm_forward(be, delta, a.mlp_raw, a.rstd_post_mlp, w.post_mlp_norm, c);
  be.residual_add(y, a.x2, delta);
}

void block_backward(Backend& be, const Tensor& dy, const Tensor& x, const BlockActivations& a,
                    const BlockWeights& w, const BlockInput& in, const ModelConfig& c,
                    const BlockScratch& s) {
  const int64_t N = in.B * in.T, C = c.hidden_size, qd = c.q_dim(), kv = c.kv_dim();
  const int64_t I = c.intermediate_size;
  const int64_t Hq = c.num_attention_heads, Hkv = c.num_key_value_heads, D = c.head_dim();
  ModelParallel& par = *in.parallel;
  const SequenceRows seq(par, N);
  const LoraDropouts drops(in, s);
  auto proj_back = [&](Proj p, const Tensor& dinp, bool accumulate, const Tensor& dout,
                       const Tensor& inp) {
    static const char* names[kNumProj] = {"gemm bwd q", "gemm bwd k", "gemm bwd v", "gemm bwd o",
                                          "gemm bwd gate", "gemm bwd up", "gemm bwd down"};
    {
      MT_PROFILE(names[p]);
      linear_base_backward(be, dinp, accumulate, dout, inp, w.proj[p]);
    }
    MT_PROFILE("lora adapters");
    const Tensor du = rows_of(s.du, N, std::max<int64_t>(w.proj[p].rank(), 1));
    lora_backward(be, dinp, du, dout, inp, a.lora_u[p], w.proj[p], drops[p]);
  };
  auto base_back = [&](Proj p, const Tensor& dinp, bool accumulate, const Tensor& dout,
                       const Tensor& inp) {  // without the adapter
    static const char* names[kNumProj] = {"gemm bwd q", "gemm bwd k", "gemm bwd v", "gemm bwd o",
                                          "gemm bwd gate", "gemm bwd up", "gemm bwd down"};
    MT_PROFILE(names[p]);
    linear_base_backward(be, dinp, accumulate, dout, inp, w.proj[p]);
  };
  // dy in the compute dtype, for the GEMMs (this rank's rows under sequence parallelism: they are
  // gathered whole for the tensor-parallel region, whose input gradient is summed and scattered
  // back into t3's rows once dy_c has been read).
  const Tensor dy_c = rows_of(s.t3, seq.rows(), C);
  if (in.context)  // the whole rows' keys and values start on their way behind the MLP's backward
    in.context->prefetch_backward(a.k, a.v, in.segments, {in.B, in.T, Hq, Hkv, D, w.window, 1, 0, c.attention_scale});

  // MLP half: dy is dL/dy, which is also the residual path's share of dL/dx2.
  {
    MT_PROFILE("residual/norm backward");
    if (c.post_norms) post_norm_backward(be, dy_c, dy, a.mlp_raw, a.rstd_post_mlp, w.post_mlp_norm, c, s);
    else be.convert(dy_c, dy);
  }
  const Tensor dn2 = rows_of(s.t0, N, C);  // written once dh has been read
  if (w.moe) {
    // The region's input and output gradient whole (gathered under sequence parallelism; t1 is
    // free in an MoE layer), its dn2 a partial sum over tensor-parallel ranks like the MLP's.
    const Tensor n2 = seq.whole(a.n2, rows_of(s.t1, N, C));
    moe_backward(be, dn2, seq.whole(dy_c, s.whole), n2, a.moe, w.moe, c, s.moe, in.moe_loss, par);
  } else {
    const Tensor dh = rows_of(s.t0, N, I);
    proj_back(kDown, dh, false, seq.whole(dy_c, s.whole), a.h);
    const Tensor n2 = seq.whole(a.n2, s.whole);  // over the gathered dy, read
    const Tensor dgate = rows_of(s.t1, N, I), dup = rows_of(s.t2, N, I);
    if (c.gelu_mlp()) {
      {
        MT_PROFILE("gelu backward");
        be.gelu_backward(dup, dh, a.up);
      }
      proj_back(kUp, dn2, false, dup, n2);
    } else {
      if (c.geglu) {
        MT_PROFILE("geglu backward");
        be.geglu_backward(dgate, dup, dh, a.gate, a.up);
      } else {
        MT_PROFILE("swiglu backward");
        be.swiglu_backward(dgate, dup, dh, a.gate, a.up);
      }
      const ProjGroup gate_up({kGate, kUp}, w, drops);
      if (lora_group_batches(gate_up.group(), s.lora_group, N)) {
        base_back(kGate, dn2, false, dgate, n2);
        base_back(kUp, dn2, true, dup, n2);
        MT_PROFILE("lora adapters");  // dn2 += du_cat A_cat: onto the base products' sum
        const Tensor dys[] = {dgate, dup}, us[] = {a.lora_u[kGate], a.lora_u[kUp]};
        lora_group_backward(be, dn2, dys, n2, us, gate_up.group(), s.lora_group);
      } else {
        proj_back(kGate, dn2, false, dgate, n2);
        proj_back(kUp, dn2, true, dup, n2);
      }
    }
  }
  const Tensor dn2_sum = seq.sum(dn2, s.t3);  // column-parallel: each rank's dn2 is a partial sum
  {
    MT_PROFILE("residual/norm backward");
    // dy = dL/dx2. Without post norms dy_c is dy in the compute dtype, written in the norm's pass
    // (norm.h); under sequence parallelism dn2_sum is dy_c's own rows, which that pass allows.
    if (c.post_norms) {
      norm_backward(be, c, dy, dn2_sum, a.x2, w.norm2, a.mean2, a.rstd2);
      post_norm_backward(be, dy_c, dy, a.attn_raw, a.rstd_post_attn, w.post_attn_norm, c, s);
    } else {
      norm_backward_convert(be, c, dy, dy_c, dn2_sum, a.x2, w.norm2, a.mean2, a.rstd2);
    }
  }

  // Attention half.
  const Tensor datt = rows_of(s.t0, N, qd);
  proj_back(kO, datt, false, seq.whole(dy_c, s.whole), a.att);
  const Tensor dq = rows_of(s.t1, N, qd), dk = rows_of(s.t4, N, kv), dv = rows_of(s.t5, N, kv);
  {
    MT_PROFILE("attention backward");
    const AttentionDims dims{in.B, in.T, Hq, Hkv, D, w.window, 1, 0, c.attention_scale};
    if (in.context)
      in.context->attention_backward(dq, dk, dv, datt, a.att, a.lse, a.q, a.k, a.v, in.segments, dims);
    else
      be.attention_backward(dq, dk, dv, datt, a.att, a.lse, a.q, a.k, a.v, in.segments, dims);
  }
  if (!c.learned_positions()) {
    MT_PROFILE("rope backward");
    const Tensor& rope_cos = w.local_rope ? in.rope_local_cos : in.rope_cos;
    const Tensor& rope_sin = w.local_rope ? in.rope_local_sin : in.rope_sin;
    be.rope_backward(dq, rope_cos, rope_sin, in.positions, Hq);
    be.rope_backward(dk, rope_cos, rope_sin, in.positions, Hkv);
  }
  if (split_qk_norm(c)) {
    MT_PROFILE("q/k norm backward");
    const SplitQkNormScratch ns{s.dqk_raw, s.dnorm_part, s.dnorm_rows};
    split_qk_norm_backward(be, par, {dq, a.q_raw, w.q_norm, w.dq_norm}, {dk, a.k_raw, w.k_norm, w.dk_norm}, a.rstd_q,
                           ns, c);
  } else if (c.qk_norm) {
    MT_PROFILE("q/k norm backward");
    const int64_t qg = c.qk_norm_whole ? 1 : Hq, kg = c.qk_norm_whole ? 1 : Hkv;
    head_norm_backward(be, par, dq, a.q_raw, a.rstd_q, w.q_norm, w.dq_norm, qg, dq.cols / qg, s, c.norm_weight_offset);
    head_norm_backward(be, par, dk, a.k_raw, a.rstd_k, w.k_norm, w.dk_norm, kg, dk.cols / kg, s, c.norm_weight_offset);
  }
  const Tensor dn1 = rows_of(s.t0, N, C);
  const Tensor n1 = seq.whole(a.n1, s.whole);  // over the gathered dy, read
  const ProjGroup qkv_lora({kQ, kK, kV}, w, drops);
  const bool qkv_batched = lora_group_batches(qkv_lora.group(), s.lora_group, N);
  if (w.qkv) {
    {
      MT_PROFILE("gemm bwd qkv");
      const Tensor dqkv = rows_of(s.qkv, N, qd + 2 * kv);
      const Tensor parts[] = {dq, dk, dv};
      be.concat_columns(dqkv, parts);
      be.linear_backward_input(dn1, dqkv, w.qkv);
      if (w.dqkv) be.linear_backward_weight(w.dqkv, dqkv, n1);
      bias_backward(be, dq, w.proj[kQ]);
      bias_backward(be, dk, w.proj[kK]);
      bias_backward(be, dv, w.proj[kV]);
    }
    if (!qkv_batched) {
      MT_PROFILE("lora adapters");
      for (Proj p : {kQ, kK, kV}) {
        const Tensor du = rows_of(s.du, N, std::max<int64_t>(w.proj[p].rank(), 1));
        lora_backward(be, dn1, du, p == kQ ? dq : p == kK ? dk : dv, n1, a.lora_u[p], w.proj[p], drops[p]);
      }
    }
  } else if (qkv_batched) {
    base_back(kQ, dn1, false, dq, n1);
    base_back(kK, dn1, true, dk, n1);
    base_back(kV, dn1, true, dv, n1);
  } else {
    proj_back(kQ, dn1, false, dq, n1);
    proj_back(kK, dn1, true, dk, n1);
    proj_back(kV, dn1, true, dv, n1);
  }
  if (qkv_batched) {
    MT_PROFILE("lora adapters");  // dn1 += du_cat A_cat: onto the base products' sum
    const Tensor dys[] = {dq, dk, dv}, us[] = {a.lora_u[kQ], a.lora_u[kK], a.lora_u[kV]};
    lora_group_backward(be, dn1, dys, n1, us, qkv_lora.group(), s.lora_group);
  }
  const Tensor dn1_sum = seq.sum(dn1, s.t3);  // column-parallel: dn1 likewise
  MT_PROFILE("residual/norm backward");
  norm_backward(be, c, dy, dn1_sum, x, w.norm1, a.mean1, a.rstd1);  // dy = dL/dx
}

void round_to_scratch_dtype(Backend& be, const Tensor& x, const BlockScratch& s) {
  if (s.t3.dtype == DType::f32) return;
  const Tensor tmp = s.t3.flat_slice(0, x.numel()).view(x.rows, x.cols);
  be.convert(tmp, x);
  be.convert(x, tmp);
}

}  // namespace mt
