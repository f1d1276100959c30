#include "kernels/reference/layernorm.h"

#include <cmath>
#include <vector>

#include "kernels/reference/values.h"

namespace mt::ref {

void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                       const Tensor& w, const Tensor& b, double eps) {
  const std::vector<double> X = load(x), W = load(w), Bv = load(b);
  const int64_t N = x.rows, C = x.cols;
  std::vector<double> Y(X.size()), M(static_cast<size_t>(N)), R(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) {
    const double* xr = &X[size_t(n * C)];
    double s = 0.0;
    for (int64_t c = 0; c < C; ++c) s += xr[c];
    const double m = s / double(C);
    double ss = 0.0;
    for (int64_t c = 0; c < C; ++c) ss += (xr[c] - m) * (xr[c] - m);
    const double r = 1.0 / std::sqrt(ss / double(C) + eps);
    M[size_t(n)] = m, R[size_t(n)] = r;
    for (int64_t c = 0; c < C; ++c)
      Y[size_t(n * C + c)] = (xr[c] - m) * r * W[size_t(c)] + Bv[size_t(c)];
  }
  store(out, Y);
  store(mean, M);
  store(rstd, R);
}

// y_c = xhat_c w_c + b_c, xhat = (x - m) r. For upstream g and gw_c = g_c w_c:
//   dx_c = r (gw_c - mean_k gw_k - xhat_c mean_k(gw_k xhat_k)),
//   dw_c = sum over rows of g_c xhat_c,  db_c = sum over rows of g_c.
void layernorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dout,
                        const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd) {
  const std::vector<double> G = load(dout), X = load(x), W = load(w), M = load(mean), R = load(rstd);
  std::vector<double> dX = load(dx);
  std::vector<double> dW = dw ? load(dw) : std::vector<double>{};
  std::vector<double> dB = db ? load(db) : std::vector<double>{};
  const int64_t N = x.rows, C = x.cols;
  std::vector<double> xhat(static_cast<size_t>(C));
  for (int64_t n = 0; n < N; ++n) {
    const double m = M[size_t(n)], r = R[size_t(n)];
    const double* g = &G[size_t(n * C)];
    const double* xr = &X[size_t(n * C)];
    double gw_mean = 0.0, gwx_mean = 0.0;
    for (int64_t c = 0; c < C; ++c) {
      xhat[size_t(c)] = (xr[c] - m) * r;
      gw_mean += g[c] * W[size_t(c)];
      gwx_mean += g[c] * W[size_t(c)] * xhat[size_t(c)];
    }
    gw_mean /= double(C), gwx_mean /= double(C);
    for (int64_t c = 0; c < C; ++c)
      dX[size_t(n * C + c)] += r * (g[c] * W[size_t(c)] - gw_mean - xhat[size_t(c)] * gwx_mean);
    for (int64_t c = 0; c < C; ++c) {
      if (dw) dW[size_t(c)] += g[c] * xhat[size_t(c)];
      if (db) dB[size_t(c)] += g[c];
    }
  }
  store(dx, dX);
  if (dw) store(dw, dW);
  if (db) store(db, dB);
}

}  // namespace mt::ref
