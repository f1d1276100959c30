#include "kernels/cpu/columns.h"

#include <cstring>

#include "core/bf16.h"

namespace mt {

template <class T>
void split_columns(const T* src, int64_t rows, const std::vector<ColumnBlock<T>>& blocks) {
  int64_t total = 0;
  for (const auto& b : blocks) total += b.width;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = src + r * total;
    for (const auto& b : blocks) {
      std::memcpy(b.data + r * b.width, row, size_t(b.width) * sizeof(T));
      row += b.width;
    }
  }
}

template <class T>
void concat_columns(T* dst, int64_t rows, const std::vector<ColumnBlock<T>>& blocks) {
  int64_t total = 0;
  for (const auto& b : blocks) total += b.width;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    T* row = dst + r * total;
    for (const auto& b : blocks) {
      std::memcpy(row, b.data + r * b.width, size_t(b.width) * sizeof(T));
      row += b.width;
    }
  }
}

template void split_columns<float>(const float*, int64_t, const std::vector<ColumnBlock<float>>&);
template void split_columns<bf16>(const bf16*, int64_t, const std::vector<ColumnBlock<bf16>>&);
template void concat_columns<float>(float*, int64_t, const std::vector<ColumnBlock<float>>&);
template void concat_columns<bf16>(bf16*, int64_t, const std::vector<ColumnBlock<bf16>>&);

}  // namespace mt
