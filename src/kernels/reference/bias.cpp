#include "kernels/reference/bias.h"

#include <vector>

#include "kernels/reference/values.h"

namespace mt::ref {

void bias_add(const Tensor& y, const Tensor& b) {
  std::vector<double> Y = load(y);
  const std::vector<double> B = load(b);
  const size_t C = B.size();
  for (size_t i = 0; i < Y.size(); ++i) Y[i] += B[i % C];
  store(y, Y);
}

void bias_backward(const Tensor& db, const Tensor& dy) {
  std::vector<double> dB = load(db);
  const std::vector<double> dY = load(dy);
  const size_t C = dB.size();
  for (size_t i = 0; i < dY.size(); ++i) dB[i % C] += dY[i];
  store(db, dB);
}

}  // namespace mt::ref
