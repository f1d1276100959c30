// Causal grouped-query attention, tiled with an online softmax (FlashAttention-2 style): the
// (T x T) score matrix of a head is never materialised; forward keeps only the output and the
// per-row log-sum-exp, backward recomputes scores tile by tile.
//
// Layouts are the GEMM outputs as they come: q: [B, T, Hq, D], k and v: [B, T, Hkv, D],
// out: [B, T, Hq, D]. Query head h uses KV head h / (Hq / Hkv). Scale 1/sqrt(D) unless given.
// segment (optional, may be null): [B, T] document ids; a query attends only to keys of the same
// segment (packed sequences). Causality is by index within the row of T tokens. With a sliding
// window w > 0, query i also sees only keys j > i - w; tiles wholly before the window are skipped.
#pragma once
#include <cstdint>

namespace mt {

struct AttentionShape {
  int64_t B, T, Hq, Hkv, D;
  int64_t window = 0;  // > 0: sliding window (see above); 0: all earlier keys
  // Context parallelism (backend.h AttentionDims): the T queries of a row are chunks cp_rank and
  // 2 cp - 1 - cp_rank of a sequence of cp T keys; k, v, dk, dv and segment are [B, cp T, ...]
  // and causality is by a query's true position (kernels/device_math/cp_positions.h).
  int64_t cp = 1, cp_rank = 0;
  float scale = 0.0f;  // > 0: the scores' scale; 0: 1/sqrt(D)
};

// lse: [B, Hq, T] f32, saved for backward.
template <class T>
void attention_forward(T* out, float* lse, const T* q, const T* k, const T* v,
                       const int32_t* segment, const AttentionShape& s);

// dq, dk, dv are overwritten. out and lse are the forward's results. G, the dk / dv element type,
// is T or float (bf16 T: context parallelism's partials, summed over ranks before rounding).
template <class T, class G = T>
void attention_backward(T* dq, G* dk, G* dv, const T* dout, const T* out, const float* lse,
                        const T* q, const T* k, const T* v, const int32_t* segment,
                        const AttentionShape& s);

// The bytes the kernels above allocate beside their arguments on `threads` threads (each one's
// tiles; the backward's row terms and dQ accumulators): memory the model's arenas do not hold,
// which the planner prices (backend/cpu_attention_scratch.h).
int64_t attention_scratch_bytes(const AttentionShape& s, int64_t threads, bool backward);

}  // namespace mt
