// Splitting a row-major matrix into column blocks and joining them back (Backend::split_columns /
// concat_columns): one strided copy kernel per block, float or bf16.
#pragma once
#include <cstdint>
#include <span>

#include "kernels/cuda/gpu_runtime.h"

namespace mt::cuda {

template <class T>
struct ColumnBlock {
  T* data;        // [rows, width], contiguous, device memory
  int64_t width;
};

// src [rows, sum of widths] -> each block.
template <class T>
void split_columns(const T* src, int64_t rows, std::span<const ColumnBlock<T>> blocks,
                   cudaStream_t stream);
// each block -> dst [rows, sum of widths].
template <class T>
void concat_columns(T* dst, int64_t rows, std::span<const ColumnBlock<T>> blocks,
                    cudaStream_t stream);

}  // namespace mt::cuda
