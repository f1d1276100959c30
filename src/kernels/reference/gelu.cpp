#include "kernels/reference/gelu.h"

#include <cmath>
#include <numbers>
#include <vector>

#include "kernels/reference/values.h"

namespace mt::ref {

namespace {
const double kRefGeluK = std::sqrt(2.0 / std::numbers::pi);
constexpr double kRefGeluC = 0.044715;
double ref_gelu_tanh_arg(double x) { return kRefGeluK * (x + kRefGeluC * x * x * x); }
}  // namespace

void gelu_forward(const Tensor& h, const Tensor& x) {
  const std::vector<double> X = load(x);
  std::vector<double> H(X.size());
  for (size_t i = 0; i < X.size(); ++i) H[i] = 0.5 * X[i] * (1.0 + std::tanh(ref_gelu_tanh_arg(X[i])));
  store(h, H);
}

// gelu'(x) = (1 + t)/2 + x/2 (1 - t^2) k (1 + 3 c x^2), t = tanh(k (x + c x^3)).
void gelu_backward(const Tensor& dx, const Tensor& dh, const Tensor& x) {
  const std::vector<double> X = load(x), dH = load(dh);
  std::vector<double> dX(X.size());
  for (size_t i = 0; i < X.size(); ++i) {
    const double t = std::tanh(ref_gelu_tanh_arg(X[i]));
    const double d = 0.5 * (1.0 + t) + 0.5 * X[i] * (1.0 - t * t) * kRefGeluK * (1.0 + 3.0 * kRefGeluC * X[i] * X[i]);
    dX[i] = dH[i] * d;
  }
  store(dx, dX);
}

}  // namespace mt::ref
