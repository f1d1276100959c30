#include "kernels/cuda/attention.h"

#include <algorithm>
#include <cmath>

#include "kernels/cuda/launch.h"
#include "kernels/device_math/cp_positions.h"
#include "kernels/cuda/warp_reduce.h"

namespace mt::cuda {

namespace {

template <class T> constexpr DType dtype_of_element();
template <> constexpr DType dtype_of_element<float>() { return DType::f32; }
template <> constexpr DType dtype_of_element<__nv_bfloat16>() { return DType::bf16; }

// One block per score row, of the row's keys rounded up to a warp (at most kThreads) threads.
//
// Where a chunk's score rows are: batch row b, query heads h0.., query rows r0..r0+rows, keys
// 0..keys (= the last query's position + 1: no later key is visible to any of its queries). Row
// i * rows + r of the chunk is query row r0 + r of head h0 + i.
struct ChunkPos {
  int64_t b, h0, r0, rows, keys, T, Hq;
  int64_t window;  // > 0: sliding window
  int64_t cp, cp_rank;  // context parallelism: the queries' chunks of the keys' sequence
  __host__ __device__ int64_t position(int64_t t) const {
    return dm::cp_query_position(t, T, cp, cp_rank);
  }
};

// Whether query t (at key position `position`) sees key j (causal, the same document when
// segments are given, and within the sliding window when one is set).
struct Visibility {
  const int32_t* seg;  // this batch row's segment ids, or null
  int64_t t;           // the query's key position
  int32_t doc;
  int64_t window;
  __device__ Visibility(const int32_t* segments, const ChunkPos& c, int64_t query)
      : seg(segments ? segments + c.b * c.T * c.cp : nullptr), t(c.position(query)),
        doc(seg ? seg[t] : 0), window(c.window) {}
  __device__ bool operator()(int64_t j) const {
    return j <= t && (window <= 0 || t - j < window) && (!seg || seg[j] == doc);
  }
};

// Scores (already scaled) -> probabilities P (in T, for the P V product) and the row's lse.
template <class T>
__global__ void softmax_rows(const float* scores, T* p, float* lse, const int32_t* segments,
                             ChunkPos c) {
  __shared__ float partials[kWarpSize];
  const int64_t row = blockIdx.x, t = c.r0 + row % c.rows, head = c.h0 + row / c.rows;
  const float* s = scores + row * c.keys;
  const Visibility visible(segments, c, t);
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < c.keys; j += blockDim.x)
    if (visible(j)) m = fmaxf(m, s[j]);
  m = block_max(m, partials);  // finite: key t is always visible
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < c.keys; j += blockDim.x)
    if (visible(j)) sum += expf(s[j] - m);
  sum = block_sum(sum, partials);
  const float inv = 1.0f / sum;
  for (int64_t j = threadIdx.x; j < c.keys; j += blockDim.x)
    p[row * c.keys + j] = store<T>(visible(j) ? expf(s[j] - m) * inv : 0.0f);
  if (threadIdx.x == 0) lse[(c.b * c.Hq + head) * c.T + t] = m + logf(sum);
}

// Backward: P recomputed from the scores and the saved lse, kept in f32 (in place) and in T.
template <class T>
__global__ void recompute_probabilities(float* scores, T* p, const float* lse,
                                        const int32_t* segments, ChunkPos c) {
  const int64_t row = blockIdx.x, t = c.r0 + row % c.rows, head = c.h0 + row / c.rows;
  const Visibility visible(segments, c, t);
  const float l = lse[(c.b * c.Hq + head) * c.T + t];
  float* s = scores + row * c.keys;
  for (int64_t j = threadIdx.x; j < c.keys; j += blockDim.x) {
    const float pj = visible(j) ? expf(s[j] - l) : 0.0f;
    s[j] = pj;
    p[row * c.keys + j] = store<T>(pj);
  }
}

// dS = P (dP - sum_j P dP), the softmax's backward (the 1/sqrt(D) goes into the GEMMs' alpha).
template <class T>
__global__ void softmax_backward_rows(const float* p, const float* dp, T* ds, ChunkPos c) {
  __shared__ float partials[kWarpSize];
  const int64_t row = blockIdx.x;
  const float* pr = p + row * c.keys;
  const float* dpr = dp + row * c.keys;
  float d = 0.0f;
  for (int64_t j = threadIdx.x; j < c.keys; j += blockDim.x) d += pr[j] * dpr[j];
  d = block_sum(d, partials);
  for (int64_t j = threadIdx.x; j < c.keys; j += blockDim.x)
    ds[row * c.keys + j] = store<T>(pr[j] * (dpr[j] - d));
}

// dst[t, e] (leading dimension ld) = sum over the slots of acc[slot, t, e], slots in order.
template <class T>
__global__ void sum_slots(T* dst, int64_t ld, const float* acc, int64_t slots, int64_t T_,
                          int64_t D) {
  const int64_t n = T_ * D;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    float s = 0.0f;
    for (int64_t k = 0; k < slots; ++k) s += acc[k * n + i];
    dst[(i / D) * ld + i % D] = store<T>(s);
  }
}

size_t aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

// The scratch regions of one chunk: scores (f32), dP (f32), P or dS in T, and the two per-slot
// f32 accumulators of dk and dv.
struct Scratch {
  float* scores;
  float* dp;
  void* p;
  float* acc_k;
  float* acc_v;
};

Scratch carve(void* base, const AttentionShape& s, const AttentionChunk& c, size_t elem,
              bool backward) {
  const size_t n = size_t(c.heads * c.rows * s.keys()), acc = size_t(c.heads * s.keys() * s.D);
  char* at = static_cast<char*>(base);
  auto take = [&](size_t bytes) {
    char* r = at;
    at += aligned(bytes);
    return r;
  };
  Scratch r{};
  r.scores = reinterpret_cast<float*>(take(n * 4));
  r.p = take(n * elem);
  if (backward) {
    r.dp = reinterpret_cast<float*>(take(n * 4));
    r.acc_k = reinterpret_cast<float*>(take(acc * 4));
    r.acc_v = reinterpret_cast<float*>(take(acc * 4));
  }
  return r;
}

// Calls f(b, kv head, first query head, heads, first row, rows) for every chunk, in a fixed order;
// kv_done(b, kv head) after a KV head's last chunk.
template <class F, class G>
void for_each_chunk(const AttentionShape& s, const AttentionChunk& c, F&& f, G&& kv_done) {
  const int64_t group = s.Hq / s.Hkv;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t kv = 0; kv < s.Hkv; ++kv) {
      for (int64_t h0 = kv * group; h0 < (kv + 1) * group; h0 += c.heads)
        for (int64_t r0 = 0; r0 < s.T; r0 += c.rows)
          f(b, kv, h0, std::min(c.heads, (kv + 1) * group - h0), r0, std::min(c.rows, s.T - r0));
      kv_done(b, kv);
    }
}

}  // namespace

int64_t attention_row_tile(int64_t T) {
  return std::min(T, std::max(kAttentionMinRowTile, (T + kAttentionRowTiles - 1) / kAttentionRowTiles));
}

AttentionChunk attention_chunk(const AttentionShape& s, int64_t max_scores) {
  const int64_t group = s.Hq / s.Hkv, tile = attention_row_tile(s.T), per_head = tile * s.keys();
  const int64_t heads = std::clamp<int64_t>(max_scores / std::max<int64_t>(per_head, 1), 1, group);
  const int64_t rows = heads * per_head <= max_scores
                           ? tile
                           : std::clamp<int64_t>(max_scores / std::max<int64_t>(heads * s.keys(), 1), 1, tile);
  return {heads, rows};
}

size_t attention_scratch_bytes(const AttentionShape& s, const AttentionChunk& c, size_t elem,
                               bool backward) {
  const size_t n = size_t(c.heads * c.rows * s.keys()), acc = size_t(c.heads * s.keys() * s.D);
  size_t bytes = aligned(n * 4) + aligned(n * elem);
  if (backward) bytes += aligned(n * 4) + 2 * aligned(acc * 4);
  return bytes;
}

template <class T>
void attention_forward(CublasLt& gemm, T* out, float* lse, const T* q, const T* k, const T* v,
                       const int32_t* segments, const AttentionShape& s, const AttentionChunk& c,
                       void* scratch, cudaStream_t stream) {
  const Scratch w = carve(scratch, s, c, sizeof(T), false);
  const DType dt = dtype_of_element<T>();
  const int64_t qw = s.Hq * s.D, kw = s.Hkv * s.D;
  const float scale = s.scale > 0.0f ? s.scale : 1.0f / std::sqrt(float(s.D));
  for_each_chunk(s, c, [&](int64_t b, int64_t kv, int64_t h0, int64_t heads, int64_t r0,
                           int64_t rows) {
    ChunkPos pos{b, h0, r0, rows, 0, s.T, s.Hq, s.window, s.cp, s.cp_rank};
    const int64_t keys = pos.keys = pos.position(r0 + rows - 1) + 1;
    const T* qc = q + (b * s.T + r0) * qw + h0 * s.D;
    const T* kc = k + b * s.keys() * kw + kv * s.D;
    const T* vc = v + b * s.keys() * kw + kv * s.D;
    // scores[i] = scale Q_i K^T: [rows, keys] per query head, the KV head shared (stride 0).
    gemm.gemm({rows, keys, s.D, false, true, qw, kw, keys, heads, s.D, 0, rows * keys},
              {qc, kc, w.scores, dt, DType::f32, scale, 0.0f});
    MT_LAUNCH(softmax_rows<T>, unsigned(heads * rows), row_threads_warps(keys), 0, stream)(
        w.scores, static_cast<T*>(w.p), lse, segments, pos);
    check_launch("attention softmax");
    // out_i = P_i V, written into the heads' columns of out.
    gemm.gemm({rows, s.D, keys, false, false, keys, kw, qw, heads, rows * keys, 0, s.D},
              {w.p, vc, out + (b * s.T + r0) * qw + h0 * s.D, dt, dt, 1.0f, 0.0f});
  }, [](int64_t, int64_t) {});
}

template <class T, class G>
void attention_backward(CublasLt& gemm, T* dq, G* dk, G* dv, const T* dout, const float* lse,
                        const T* q, const T* k, const T* v, const int32_t* segments,
                        const AttentionShape& s, const AttentionChunk& c, void* scratch,
                        cudaStream_t stream) {
  const Scratch w = carve(scratch, s, c, sizeof(T), true);
  const DType dt = dtype_of_element<T>();
  const int64_t qw = s.Hq * s.D, kw = s.Hkv * s.D, acc_stride = s.keys() * s.D;
  const size_t acc_bytes = size_t(c.heads * acc_stride) * 4;
  const float scale = s.scale > 0.0f ? s.scale : 1.0f / std::sqrt(float(s.D));
  T* p = static_cast<T*>(w.p);  // P, then (once dV has it) dS
  bool fresh_kv = true;
  for_each_chunk(s, c, [&](int64_t b, int64_t kv, int64_t h0, int64_t heads, int64_t r0,
                           int64_t rows) {
    if (fresh_kv) {  // the per-slot accumulators of this KV head's dk and dv start at zero
      check(cudaMemsetAsync(w.acc_k, 0, acc_bytes, stream), "clearing attention scratch");
      check(cudaMemsetAsync(w.acc_v, 0, acc_bytes, stream), "clearing attention scratch");
      fresh_kv = false;
    }
    ChunkPos pos{b, h0, r0, rows, 0, s.T, s.Hq, s.window, s.cp, s.cp_rank};
    const int64_t keys = pos.keys = pos.position(r0 + rows - 1) + 1, row0 = (b * s.T + r0) * qw + h0 * s.D;
    const T* kc = k + b * s.keys() * kw + kv * s.D;
    const T* vc = v + b * s.keys() * kw + kv * s.D;
    gemm.gemm({rows, keys, s.D, false, true, qw, kw, keys, heads, s.D, 0, rows * keys},
              {q + row0, kc, w.scores, dt, DType::f32, scale, 0.0f});
    MT_LAUNCH(recompute_probabilities<T>, unsigned(heads * rows), row_threads_warps(keys), 0, stream)(
        w.scores, p, lse, segments, pos);
    check_launch("attention probabilities");
    // acc_v[i] += P_i^T dO_i
    gemm.gemm({keys, s.D, rows, true, false, keys, qw, s.D, heads, rows * keys, s.D, acc_stride},
              {p, dout + row0, w.acc_v, dt, DType::f32, 1.0f, 1.0f});
    // dP_i = dO_i V^T
    gemm.gemm({rows, keys, s.D, false, true, qw, kw, keys, heads, s.D, 0, rows * keys},
              {dout + row0, vc, w.dp, dt, DType::f32, 1.0f, 0.0f});
    MT_LAUNCH(softmax_backward_rows<T>, unsigned(heads * rows), row_threads_warps(keys), 0, stream)(w.scores, w.dp, p,
                                                                              pos);
    check_launch("attention softmax backward");
    // dQ_i = scale dS_i K, into the heads' columns of dq; acc_k[i] += scale dS_i^T Q_i
    gemm.gemm({rows, s.D, keys, false, false, keys, kw, qw, heads, rows * keys, 0, s.D},
              {p, kc, dq + row0, dt, dt, scale, 0.0f});
    gemm.gemm({keys, s.D, rows, true, false, keys, qw, s.D, heads, rows * keys, s.D, acc_stride},
              {p, q + row0, w.acc_k, dt, DType::f32, scale, 1.0f});
  }, [&](int64_t b, int64_t kv) {
    const int64_t at = b * s.keys() * kw + kv * s.D;
    MT_LAUNCH(sum_slots<G>, grid_for(acc_stride), kThreads, 0, stream)(dk + at, kw, w.acc_k, c.heads,
                                                                s.keys(), s.D);
    MT_LAUNCH(sum_slots<G>, grid_for(acc_stride), kThreads, 0, stream)(dv + at, kw, w.acc_v, c.heads,
                                                                s.keys(), s.D);
    check_launch("attention dk/dv sum");
    fresh_kv = true;
  });
}

#define MT_ATTENTION_INSTANCES(T)                                                              \
  template void attention_forward<T>(CublasLt&, T*, float*, const T*, const T*, const T*,      \
                                     const int32_t*, const AttentionShape&,                    \
                                     const AttentionChunk&, void*, cudaStream_t);
#define MT_ATTENTION_BACKWARD(T, G)                                                            \
  template void attention_backward<T, G>(CublasLt&, T*, G*, G*, const T*, const float*, const T*, \
                                         const T*, const T*, const int32_t*,                   \
                                         const AttentionShape&, const AttentionChunk&, void*,  \
                                         cudaStream_t);
MT_ATTENTION_INSTANCES(float)
MT_ATTENTION_INSTANCES(__nv_bfloat16)
MT_ATTENTION_BACKWARD(float, float)
MT_ATTENTION_BACKWARD(__nv_bfloat16, __nv_bfloat16)
MT_ATTENTION_BACKWARD(__nv_bfloat16, float)  // f32 key gradients of bf16 keys (context parallelism)
#undef MT_ATTENTION_BACKWARD
#undef MT_ATTENTION_INSTANCES

}  // namespace mt::cuda
