#include "kernels/reference/matmul.h"

#include "kernels/reference/values.h"

namespace mt::ref {

void matmul(const Tensor& c, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
            double alpha, bool accumulate) {
  const std::vector<double> A = load(a), B = load(b);
  std::vector<double> C = accumulate ? load(c) : std::vector<double>(size_t(c.numel()), 0.0);
  const int64_t M = c.rows, N = c.cols, K = trans_a ? a.rows : a.cols;
  // op(a)[i, k] and op(b)[k, j] read straight from the stored layouts.
  auto op_a = [&](int64_t i, int64_t k) { return trans_a ? A[k * a.cols + i] : A[i * a.cols + k]; };
  auto op_b = [&](int64_t k, int64_t j) { return trans_b ? B[j * b.cols + k] : B[k * b.cols + j]; };
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0.0;
      for (int64_t k = 0; k < K; ++k) s += op_a(i, k) * op_b(k, j);
      C[i * N + j] += alpha * s;
    }
  store(c, C);
}

}  // namespace mt::ref
