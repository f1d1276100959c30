#include "kernels/reference/swiglu.h"

#include <cmath>
#include <vector>

#include "kernels/reference/values.h"

namespace mt::ref {

namespace {
double sigmoid(double a) { return 1.0 / (1.0 + std::exp(-a)); }
}  // namespace

void swiglu_forward(const Tensor& h, const Tensor& gate, const Tensor& up) {
  const std::vector<double> G = load(gate), U = load(up);
  std::vector<double> H(G.size());
  for (size_t i = 0; i < G.size(); ++i) H[i] = G[i] * sigmoid(G[i]) * U[i];
  store(h, H);
}

// silu'(a) = s + a s (1 - s) with s = sigmoid(a).
void swiglu_backward(const Tensor& dgate, const Tensor& dup, const Tensor& dh, const Tensor& gate,
                     const Tensor& up) {
  const std::vector<double> G = load(gate), U = load(up), dH = load(dh);
  std::vector<double> dG(G.size()), dU(G.size());
  for (size_t i = 0; i < G.size(); ++i) {
    const double s = sigmoid(G[i]);
    dG[i] = dH[i] * U[i] * (s + G[i] * s * (1.0 - s));
    dU[i] = dH[i] * G[i] * s;
  }
  store(dgate, dG);
  store(dup, dU);
}

}  // namespace mt::ref
