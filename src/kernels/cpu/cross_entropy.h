// Softmax cross-entropy over the vocabulary, fused with its backward so a chunk of logits can be
// turned into its gradient in place (the logits are never kept for the whole batch).
#pragma once
#include <cstdint>

namespace mt {

// logits: [N, V] of T; targets: [N], a negative target is ignored (no loss, zero gradient).
// losses[n] = logsumexp(logits[n]) - logits[n, targets[n]] (0 for ignored rows), f32.
// If dlogits is non-null: dlogits[n, :] = (softmax(logits[n]) - onehot(targets[n])) * grad_scale
// (zero rows for ignored targets). dlogits may alias logits (in-place). Returns the sum of losses.
template <class T>
double cross_entropy_forward_backward(float* losses, T* dlogits, const T* logits,
                                      const int32_t* targets, int64_t N, int64_t V,
                                      float grad_scale);

}  // namespace mt
