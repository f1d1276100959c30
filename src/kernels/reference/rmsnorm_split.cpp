#include "kernels/reference/rmsnorm_split.h"

#include <cmath>
#include <vector>

#include "kernels/reference/values.h"

namespace mt::ref {

void rmsnorm_row_dots(const Tensor& dots, const Tensor& x, const Tensor& y, const Tensor& w, double weight_offset) {
  const std::vector<double> X = load(x), Y = load(y);
  std::vector<double> W = w ? load(w) : std::vector<double>(size_t(x.cols), 1.0);
  if (w)
    for (double& v : W) v += weight_offset;
  const int64_t N = x.rows, C = x.cols;
  std::vector<double> D(size_t(N), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) D[size_t(n)] += X[size_t(n * C + c)] * Y[size_t(n * C + c)] * W[size_t(c)];
  store(dots, D);
}

void rmsnorm_forward_summed(const Tensor& out, const Tensor& rstd, const Tensor& x, const Tensor& w, int64_t width,
                            double eps, double weight_offset) {
  const std::vector<double> X = load(x), W = load(w), S = load(rstd);
  const int64_t N = x.rows, C = x.cols;
  std::vector<double> Y(X.size()), R(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) {
    const double r = 1.0 / std::sqrt(S[size_t(n)] / double(width) + eps);
    R[size_t(n)] = r;
    for (int64_t c = 0; c < C; ++c) Y[size_t(n * C + c)] = X[size_t(n * C + c)] * r * (weight_offset + W[size_t(c)]);
  }
  store(out, Y);
  store(rstd, R);
}

// As rmsnorm_backward (kernels/reference/rmsnorm.cpp) with the row's sum of g w' x over every
// device's columns given and the mean over `width` values.
void rmsnorm_backward_summed(const Tensor& dx, const Tensor& dw, const Tensor& dout, const Tensor& x,
                             const Tensor& w, const Tensor& rstd, const Tensor& dots, int64_t width,
                             double weight_offset) {
  const std::vector<double> G = load(dout), X = load(x), W = load(w), R = load(rstd), D = load(dots);
  std::vector<double> dX = load(dx);
  std::vector<double> dW = dw ? load(dw) : std::vector<double>{};
  const int64_t N = x.rows, C = x.cols;
  for (int64_t n = 0; n < N; ++n) {
    const double r = R[size_t(n)], k = D[size_t(n)] * r * r * r / double(width);
    for (int64_t c = 0; c < C; ++c) {
      const size_t i = size_t(n * C + c);
      dX[i] += r * (weight_offset + W[size_t(c)]) * G[i] - X[i] * k;
      if (dw) dW[size_t(c)] += G[i] * X[i] * r;
    }
  }
  store(dx, dX);
  if (dw) store(dw, dW);
}

}  // namespace mt::ref
