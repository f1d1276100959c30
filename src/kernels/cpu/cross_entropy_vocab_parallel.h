// Cross-entropy over a vocabulary split across tensor-parallel ranks (Megatron's vocabulary-
// parallel loss): each rank holds the logits of columns [v0, v0 + V) only, and the whole [N, vocab]
// matrix never exists anywhere. Three local passes with two reductions between them, which the
// caller performs over the ranks:
//   1. vp_ce_row_max:   m[n] = max of this rank's logits of row n        -> caller: max over ranks
//   2. vp_ce_row_sums:  s[n] = sum exp(x - m), s[N + n] = target logit
//                       (0 where another rank holds the target)         -> caller: sum over ranks
//   3. vp_ce_finish:    per-row losses and, optionally, dlogits in place (same contract as
//                       cross_entropy_forward_backward: dlogits = (softmax - onehot) * grad_scale).
// Rows whose target is negative are not counted: loss 0, gradient 0.
#pragma once
#include <cstdint>

namespace mt {

template <class T>
void vp_ce_row_max(float* m, const T* logits, const int32_t* targets, int64_t N, int64_t V);

template <class T>
void vp_ce_row_sums(float* sums, const T* logits, const int32_t* targets, const float* m,
                    int64_t N, int64_t V, int64_t v0);

// Returns the sum of the rows' losses (every rank gets the same value).
template <class T>
double vp_ce_finish(float* losses, T* dlogits, const T* logits, const int32_t* targets,
                    const float* m, const float* sums, int64_t N, int64_t V, int64_t v0,
                    float grad_scale);

}  // namespace mt
