#include "kernels/cpu/sum_squares.h"

#include <algorithm>
#include <vector>

namespace mt {

double sum_squares(const float* x, int64_t n) {
  constexpr int64_t kChunks = 64;  // fixed, so the summation order never depends on threads
  std::vector<double> partial(kChunks, 0.0);
  const int64_t per = (n + kChunks - 1) / kChunks;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < kChunks; ++c) {
    // float partial sums over short runs vectorise; runs are added in double.
    double s = 0.0;
    const int64_t end = std::min(n, (c + 1) * per);
    for (int64_t i0 = c * per; i0 < end; i0 += 1024) {
      float f = 0.0f;
      for (int64_t i = i0; i < std::min(end, i0 + 1024); ++i) f += x[i] * x[i];
      s += f;
    }
    partial[c] = s;
  }
  double sum = 0.0;
  for (double s : partial) sum += s;
  return sum;
}

}  // namespace mt
