#include "kernels/reference/optimizer.h"

#include <cmath>
#include <vector>

#include "kernels/reference/values.h"

namespace mt::ref {

// torch.optim.AdamW (foreach=False), per element with g = grad * grad_scale:
//   w <- w * (1 - lr * wd)                                   (decoupled decay)
//   m <- beta1 m + (1 - beta1) g,   v <- beta2 v + (1 - beta2) g^2
//   w <- w - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// m and v are f32 state, so the update reads them after their rounding to f32, as torch does.
void adamw_update(const Tensor& master, const Tensor& master16, const Tensor& grad,
                  const Tensor& m, const Tensor& v, const AdamWStep& s) {
  std::vector<double> W = load(master), M = load(m), V = load(v);
  const std::vector<double> G = load(grad);
  const double step_size = s.lr / (1.0 - std::pow(s.beta1, double(s.t)));
  const double bc2_sqrt = std::sqrt(1.0 - std::pow(s.beta2, double(s.t)));
  const double decay = s.decay ? 1.0 - s.lr * s.weight_decay : 1.0;
  for (size_t i = 0; i < W.size(); ++i) {
    const double g = G[i] * s.grad_scale;
    M[i] = float(s.beta1 * M[i] + (1.0 - s.beta1) * g);
    V[i] = float(s.beta2 * V[i] + (1.0 - s.beta2) * g * g);
    W[i] = W[i] * decay - step_size * M[i] / (std::sqrt(V[i]) / bc2_sqrt + s.eps);
  }
  store(m, M);
  store(v, V);
  store(master, W);
  if (master16) store(master16, W);  // rounds the f32 master, the value the model trains with
}

double sum_squares(const Tensor& x) {
  double s = 0.0;
  for (double e : load(x)) s += e * e;
  return s;
}

}  // namespace mt::ref
