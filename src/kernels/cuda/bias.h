// A bias on a linear layer's output features (Backend::bias_add / bias_backward): y[r, c] += b[c],
// and db[c] += sum over r of dy[r, c], one thread per column summing the rows in order
// (deterministic; neighbouring threads read neighbouring columns, so the reads coalesce).
#pragma once
#include <cstdint>

#include "kernels/cuda/gpu_runtime.h"

namespace mt::cuda {

template <class T>
void bias_add(T* y, const float* b, int64_t rows, int64_t cols, cudaStream_t stream);
template <class T>
void bias_backward(float* db, const T* dy, int64_t rows, int64_t cols, cudaStream_t stream);

}  // namespace mt::cuda
