// Causal attention on the GPU as batched cuBLASLt GEMMs and row-softmax kernels, chunk by chunk
// so that the score matrices of one chunk fit a bounded scratch buffer (no fused kernel yet: this
// is the simple, robust form; docs/gpu.md).
//
// Layouts are the backend's (backend.h): q, out, dq [B*T, Hq*D]; k, v, dk, dv [B*T, Hkv*D];
// segments i32 [B*T] or null; lse f32 [B, Hq, T], like the CPU kernel's. Query head h reads KV
// head h / (Hq / Hkv); scale 1/sqrt(D); a query attends to keys at or before it in its row of T
// tokens, and with segments only to keys of its own document.
//
// A chunk is `heads` query heads of one KV head (one batched GEMM, the KV head shared) and `rows`
// query rows, whose keys end at the chunk's last query (causal): the scores of a chunk are at
// most heads x rows x keys() floats.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/cublaslt_gemm.h"
#include "kernels/cuda/gpu_runtime.h"

namespace mt::cuda {

struct AttentionShape {
  int64_t B, T, Hq, Hkv, D;
  int64_t window = 0;  // > 0: query t sees only keys j > t - window (a sliding window)
  // Context parallelism (backend.h AttentionDims): the T queries of a row are chunks cp_rank and
  // 2 cp - 1 - cp_rank of a sequence of cp T keys; k, v, dk, dv and segments are [B, cp T, ...].
  int64_t cp = 1, cp_rank = 0;
  float scale = 0.0f;  // > 0: the scores' scale; 0: 1/sqrt(D)
  int64_t keys() const { return T * cp; }
};

struct AttentionChunk {
  int64_t heads, rows;
};

// Query rows go in tiles: a causal tile computes the scores of the keys up to its last row only,
// so the tiles of a sequence compute about (1/2 + 1/(2 tiles)) of the T x T square instead of
// all of it. About kAttentionRowTiles tiles a sequence (fewer, larger GEMMs than fixed small
// tiles), of at least kAttentionMinRowTile rows.
inline constexpr int64_t kAttentionRowTiles = 8, kAttentionMinRowTile = 64;
int64_t attention_row_tile(int64_t T);

// The largest chunk of at most one row tile whose scores stay within `max_scores` floats (at
// least one head and row).
AttentionChunk attention_chunk(const AttentionShape& s, int64_t max_scores);
// Scratch bytes the forward or the backward needs for chunk c and element type of `elem_bytes`.
size_t attention_scratch_bytes(const AttentionShape& s, const AttentionChunk& c, size_t elem_bytes,
                               bool backward);

// T is float or __nv_bfloat16. Both run on the GEMM handle's stream; scratch holds at least
// attention_scratch_bytes(s, c, sizeof(T), backward) bytes aligned to 256.
template <class T>
void attention_forward(CublasLt& gemm, T* out, float* lse, const T* q, const T* k, const T* v,
                       const int32_t* segments, const AttentionShape& s, const AttentionChunk& c,
                       void* scratch, cudaStream_t stream);
// dq, dk, dv overwritten. The softmax is recomputed from q, k and lse. G, the dk / dv element
// type, is T or float (bf16 T: context parallelism's partials, summed over ranks before rounding).
template <class T, class G = T>
void attention_backward(CublasLt& gemm, T* dq, G* dk, G* dv, const T* dout, const float* lse,
                        const T* q, const T* k, const T* v, const int32_t* segments,
                        const AttentionShape& s, const AttentionChunk& c, void* scratch,
                        cudaStream_t stream);

}  // namespace mt::cuda
