// Reference attention: the score matrix of each (batch, query head) is materialised, masked
// (causal, same document when segment ids are given, within the sliding window when one is set), and softmaxed in double.
//
// Layouts are the backend's: q and out [B, T, Hq, D], k and v [B, Tk, Hkv, D] (GEMM outputs as
// they come; Tk = cp T), segments [B, Tk] or empty. Query i sits at key position
// dm::cp_query_position(i) (i itself without context parallelism). Query head h reads KV head h / (Hq / Hkv); scale 1/sqrt(D) unless given.
// This backend's lse layout is [B, T, Hq]: the log-sum-exp of a query row's scaled scores.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace mt::ref {

struct AttentionSizes {
  int64_t B, T, Hq, Hkv, D;
  int64_t window = 0;  // > 0: query i sees only keys j with i - window < j (a sliding window)
  // Context parallelism (backend.h AttentionDims): the T queries of a row are two chunks of a
  // sequence of cp T keys; k, v, dk, dv and segments are [B, cp T, ...].
  int64_t cp = 1, cp_rank = 0;
  double scale = 0.0;  // > 0: the scores' scale; 0: 1/sqrt(D)
  int64_t keys() const { return T * cp; }
};

void attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                       const Tensor& v, const Tensor& segments, const AttentionSizes& s);

// dq, dk, dv overwritten with the exact gradient of the forward. The softmax is recomputed from
// q and k rather than taken from out and lse, so the oracle does not inherit a rounding of the
// saved values (bf16 out); out and lse are only checked to have been given.
void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                        const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& segments, const AttentionSizes& s);

// One query token over a KV cache: q and out [Hq, D]; caches [>= len, Hkv, D] f32, every one of
// the first len positions visible.
void decode_attention(const Tensor& out, const Tensor& q, const Tensor& k_cache,
                      const Tensor& v_cache, int64_t len, int64_t Hq, int64_t Hkv, double scale = 0.0);

}  // namespace mt::ref
