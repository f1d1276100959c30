// Softmax cross-entropy over rows of logits [N, V] of T (float or bf16), fused with its backward
// (Backend::cross_entropy and the three vocabulary-parallel passes). One block per row; every
// reduction inside a row is a fixed tree, so each row's result is the same on every run.
//
// The kernels write per-row losses; the backend adds them on the host in row order (as the CPU
// kernels do) for the returned sum. A kernel cannot throw: a target >= V (whole-row version) gives
// that row the loss NaN and a zero gradient row, which the backend reports as the CPU backend
// reports the bad target. Negative targets are ignored rows: loss 0, zero gradient.
#pragma once
#include <cstdint>

#include "kernels/cuda/gpu_runtime.h"

namespace mt::cuda {

// losses f32 [N]; if dlogits is non-null (it may be logits) it becomes
// (softmax - onehot) * grad_scale.
template <class T>
void cross_entropy(float* losses, T* dlogits, const T* logits, const int32_t* targets, int64_t N,
                   int64_t V, float grad_scale, cudaStream_t stream);

// Vocabulary-parallel: this device holds columns [v0, v0 + V) of every row.
// 1. row_max[n] = max of this device's logits of row n (0 for an ignored row).
template <class T>
void cross_entropy_row_max(float* row_max, const T* logits, const int32_t* targets, int64_t N,
                           int64_t V, cudaStream_t stream);
// 2. sums[n] = sum of exp(x - row_max[n]) over this device's columns; sums[N + n] = the target's
//    logit where this device holds it, else 0 (both 0 for an ignored row).
template <class T>
void cross_entropy_row_sums(float* sums, const T* logits, const int32_t* targets,
                            const float* row_max, int64_t N, int64_t V, int64_t v0,
                            cudaStream_t stream);
// 3. losses and, optionally, dlogits (may be logits) from the reduced row_max and sums.
template <class T>
void cross_entropy_finish(float* losses, T* dlogits, const T* logits, const int32_t* targets,
                          const float* row_max, const float* sums, int64_t N, int64_t V,
                          int64_t v0, float grad_scale, cudaStream_t stream);

}  // namespace mt::cuda
