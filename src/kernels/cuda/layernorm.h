// LayerNorm with weight and bias (Backend::layernorm_forward / layernorm_backward): x, w, b f32,
// out and dout of T (float or bf16), mean and rstd f32 [N]. One block per row for the row-local
// parts; the weight and bias gradients, sums over rows, are reduced in a fixed order (chunks of
// kLayernormRowsPerChunk rows in row order, then the chunks in order) with no atomics, so they
// are the same on every run.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/gpu_runtime.h"

namespace mt::cuda {

inline constexpr int64_t kLayernormRowsPerChunk = 64;

template <class T>
void layernorm_forward(T* out, float* mean, float* rstd, const float* x, const float* w,
                       const float* b, int64_t N, int64_t C, float eps, cudaStream_t stream);

// Scratch bytes layernorm_backward needs (0 when there is neither dw nor db to reduce).
size_t layernorm_backward_scratch_bytes(int64_t N, int64_t C, bool with_dw_or_db);
// dx += the input gradient; dw, db += the weight and bias gradients unless null (frozen).
template <class T>
void layernorm_backward(float* dx, float* dw, float* db, const T* dout, const float* x,
                        const float* w, const float* mean, const float* rstd, int64_t N, int64_t C,
                        void* scratch, size_t scratch_bytes, cudaStream_t stream);

}  // namespace mt::cuda
