#include "kernels/reference/dropout.h"

#include "kernels/reference/values.h"

namespace mt::ref {

void dropout(const Tensor& y, const Tensor& x, const DropoutMask& mask, bool accumulate) {
  const std::vector<double> X = load(x);
  std::vector<double> Y = accumulate ? load(y) : std::vector<double>(X.size(), 0.0);
  const uint32_t threshold = dm::dropout_threshold(mask.p);
  for (int64_t r = 0; r < x.rows; ++r)
    for (int64_t c = 0; c < x.cols; ++c)
      if (dm::dropout_keeps(mask, threshold, r, c)) {
        const size_t i = size_t(r * x.cols + c);
        Y[i] += X[i] / (1.0 - double(mask.p));
      }
  store(y, Y);
}

}  // namespace mt::ref
