// Splitting a row-major matrix into column blocks and joining them back: the glue around fused
// GEMMs (one product for q, k and v, whose results the attention wants as separate matrices).
#pragma once
#include <cstdint>
#include <vector>

namespace mt {

template <class T>
struct ColumnBlock {
  T* data;        // [rows, width], contiguous
  int64_t width;
};

// src: [rows, sum of widths] -> each block
template <class T>
void split_columns(const T* src, int64_t rows, const std::vector<ColumnBlock<T>>& blocks);
// each block -> dst: [rows, sum of widths]
template <class T>
void concat_columns(T* dst, int64_t rows, const std::vector<ColumnBlock<T>>& blocks);

}  // namespace mt
