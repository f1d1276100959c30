#include "kernels/cpu/bias.h"

#include <algorithm>
#include <vector>

#include "core/bf16.h"

namespace mt {

namespace {
constexpr int64_t kParallelMin = 1 << 15;
// Columns per backward work item: threads own disjoint column strips, so no two threads add
// into one db element and the order of the row sum never depends on the thread count.
constexpr int64_t kStrip = 256;
}  // namespace

template <class T>
void bias_add(T* y, const float* b, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static) if (rows * cols > kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    T* row = y + r * cols;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) row[c] = from_float<T>(to_float(row[c]) + b[c]);
  }
}

template <class T>
void bias_backward(float* db, const T* dy, int64_t rows, int64_t cols) {
  const int64_t strips = (cols + kStrip - 1) / kStrip;
#pragma omp parallel for schedule(static) if (rows * cols > kParallelMin)
  for (int64_t s = 0; s < strips; ++s) {
    const int64_t c0 = s * kStrip, n = std::min(kStrip, cols - c0);
    double acc[kStrip] = {};
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = dy + r * cols + c0;
      for (int64_t c = 0; c < n; ++c) acc[c] += double(to_float(row[c]));
    }
    for (int64_t c = 0; c < n; ++c) db[c0 + c] = float(double(db[c0 + c]) + acc[c]);
  }
}

#define MT_INSTANTIATE(T)                                                 \
  template void bias_add<T>(T*, const float*, int64_t, int64_t);          \
  template void bias_backward<T>(float*, const T*, int64_t, int64_t);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16)
#undef MT_INSTANTIATE

}  // namespace mt
