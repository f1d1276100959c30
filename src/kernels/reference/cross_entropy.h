// Reference softmax cross-entropy, whole rows and vocabulary-parallel, in double. Contracts are
// those of kernels/cpu/cross_entropy.h and cross_entropy_vocab_parallel.h:
//   loss[n] = logsumexp(x[n]) - x[n, t[n]],  dlogits[n] = (softmax(x[n]) - onehot(t[n])) * scale,
// a negative target ignores its row (loss 0, gradient 0), and dlogits may be logits itself.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace mt::ref {

// logits [N, V]; a target >= V is an mt::Error. Returns the sum of the losses.
double cross_entropy(const Tensor& losses, const Tensor& dlogits, const Tensor& logits,
                     const Tensor& targets, double grad_scale);

// This device holds columns [v0, v0 + V) of the vocabulary. Between the passes the caller takes
// the maximum of row_max and the sum of sums over the devices.
// row_max[n]: the largest local logit (0, a finite placeholder, for ignored rows).
void cross_entropy_row_max(const Tensor& row_max, const Tensor& logits, const Tensor& targets);
// sums[n] = sum of exp(x - row_max[n]) over local columns; sums[N + n] = the target's logit if
// this device holds it, else 0. Ignored rows: 0 and 0.
void cross_entropy_row_sums(const Tensor& sums, const Tensor& logits, const Tensor& targets,
                            const Tensor& row_max, int64_t v0);
// Losses from the reduced row_max and sums, and the local columns of dlogits (if given).
double cross_entropy_finish(const Tensor& losses, const Tensor& dlogits, const Tensor& logits,
                            const Tensor& targets, const Tensor& row_max, const Tensor& sums,
                            int64_t v0, double grad_scale);

}  // namespace mt::ref
