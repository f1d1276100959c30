#include "kernels/reference/rmsnorm.h"

#include <cmath>
#include <vector>

#include "kernels/reference/values.h"

namespace mt::ref {

namespace {
// The factors the normalised row is multiplied by: offset + w (dw is unchanged by the offset).
std::vector<double> rmsnorm_offset_weights(const Tensor& w, double offset) {
  std::vector<double> W = load(w);
  for (double& v : W) v += offset;
  return W;
}
}  // namespace

void rmsnorm_forward(const Tensor& out, const Tensor& rstd, const Tensor& x, const Tensor& w,
                     double eps, double weight_offset) {
  const std::vector<double> X = load(x), W = rmsnorm_offset_weights(w, weight_offset);
  const int64_t N = x.rows, C = x.cols;
  std::vector<double> Y(X.size()), R(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) {
    const double* xr = &X[size_t(n * C)];
    double ss = 0.0;
    for (int64_t c = 0; c < C; ++c) ss += xr[c] * xr[c];
    const double r = 1.0 / std::sqrt(ss / double(C) + eps);
    R[size_t(n)] = r;
    for (int64_t c = 0; c < C; ++c) Y[size_t(n * C + c)] = xr[c] * r * W[size_t(c)];
  }
  store(out, Y);
  store(rstd, R);
}

// y_c = x_c r w_c (w_c here the offset weight) with dr/dx_c = -r^3 x_c / C, so for upstream g:
//   dx_c = r w_c g_c - x_c r^3 / C * sum_k g_k w_k x_k,   dw_c = sum over rows of g_c x_c r.
void rmsnorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& dout, const Tensor& x,
                      const Tensor& w, const Tensor& rstd, double weight_offset) {
  const std::vector<double> G = load(dout), X = load(x), W = rmsnorm_offset_weights(w, weight_offset), R = load(rstd);
  std::vector<double> dX = load(dx);
  std::vector<double> dW = dw ? load(dw) : std::vector<double>{};
  const int64_t N = x.rows, C = x.cols;
  for (int64_t n = 0; n < N; ++n) {
    const double r = R[size_t(n)];
    const double* g = &G[size_t(n * C)];
    const double* xr = &X[size_t(n * C)];
    double gwx = 0.0;
    for (int64_t c = 0; c < C; ++c) gwx += g[c] * W[size_t(c)] * xr[c];
    for (int64_t c = 0; c < C; ++c)
      dX[size_t(n * C + c)] += r * W[size_t(c)] * g[c] - xr[c] * r * r * r / double(C) * gwx;
    if (dw)
      for (int64_t c = 0; c < C; ++c) dW[size_t(c)] += g[c] * xr[c] * r;
  }
  store(dx, dX);
  if (dw) store(dw, dW);
}

}  // namespace mt::ref
