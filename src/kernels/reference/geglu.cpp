#include "kernels/reference/geglu.h"

#include <cmath>
#include <numbers>
#include <vector>

#include "kernels/reference/values.h"

namespace mt::ref {

namespace {

// Written out in double here, apart from kernels/device_math/gelu_element.h, so that the oracle
// does not share the fast kernels' arithmetic.
const double kGegluSqrt2OverPi = std::sqrt(2.0 / std::numbers::pi);

double geglu_gelu(double a) { return 0.5 * a * (1.0 + std::tanh(kGegluSqrt2OverPi * (a + 0.044715 * a * a * a))); }

// d/da: (1 + t)/2 + a/2 (1 - t^2) k (1 + 3 * 0.044715 a^2), t = tanh(k (a + 0.044715 a^3)).
double geglu_gelu_slope(double a) {
  const double t = std::tanh(kGegluSqrt2OverPi * (a + 0.044715 * a * a * a));
  return 0.5 * (1.0 + t) + 0.5 * a * (1.0 - t * t) * kGegluSqrt2OverPi * (1.0 + 3.0 * 0.044715 * a * a);
}

}  // namespace

void geglu_forward(const Tensor& h, const Tensor& gate, const Tensor& up) {
  const std::vector<double> G = load(gate), U = load(up);
  std::vector<double> H(G.size());
  for (size_t i = 0; i < G.size(); ++i) H[i] = geglu_gelu(G[i]) * U[i];
  store(h, H);
}

void geglu_backward(const Tensor& dgate, const Tensor& dup, const Tensor& dh, const Tensor& gate,
                    const Tensor& up) {
  const std::vector<double> G = load(gate), U = load(up), dH = load(dh);
  std::vector<double> dG(G.size()), dU(G.size());
  for (size_t i = 0; i < G.size(); ++i) {
    dG[i] = dH[i] * U[i] * geglu_gelu_slope(G[i]);
    dU[i] = dH[i] * geglu_gelu(G[i]);
  }
  store(dgate, dG);
  store(dup, dU);
}

}  // namespace mt::ref
