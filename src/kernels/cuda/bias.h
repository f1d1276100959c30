// A bias on a linear layer's output features (Backend::bias_add / bias_backward): y[r, c] += b[c],
// and db[c] += sum over r of dy[r, c]. The backward sums chunks of kBiasRowsPerChunk rows in
// parallel (one thread per column of a chunk, rows in order, in double; neighbouring threads read
// neighbouring columns, so the reads coalesce), then each column's chunk sums in chunk order: a
// fixed order, so the result is the same on every run, and a tall dy [tokens, features] keeps the
// whole GPU busy instead of one thread per column walking every row.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/gpu_runtime.h"

namespace mt::cuda {

template <class T>
void bias_add(T* y, const float* b, int64_t rows, int64_t cols, cudaStream_t stream);
inline constexpr int64_t kBiasRowsPerChunk = 64;
// Scratch bias_backward needs (the chunks' partial sums), in bytes.
size_t bias_backward_scratch_bytes(int64_t rows, int64_t cols);
template <class T>
void bias_backward(float* db, const T* dy, int64_t rows, int64_t cols, void* scratch,
                   size_t scratch_bytes, cudaStream_t stream);

}  // namespace mt::cuda
