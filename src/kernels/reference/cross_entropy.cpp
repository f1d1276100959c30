#include "kernels/reference/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/reference/values.h"

namespace mt::ref {

namespace {

double row_max_of(const double* x, int64_t V) {
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t v = 0; v < V; ++v) m = std::max(m, x[v]);
  return m;
}

double row_sum_exp(const double* x, int64_t V, double m) {
  double s = 0.0;
  for (int64_t v = 0; v < V; ++v) s += std::exp(x[v] - m);
  return s;
}

// Row n's gradient over the local columns [v0, v0 + V): softmax * scale, minus scale at the
// target when it is local. m and sum describe the whole row (all devices).
void softmax_gradient(double* d, const double* x, int64_t V, double m, double sum, int64_t target,
                      int64_t v0, double scale) {
  for (int64_t v = 0; v < V; ++v) d[v] = std::exp(x[v] - m) / sum * scale;
  if (target >= v0 && target < v0 + V) d[target - v0] -= scale;
}

}  // namespace

double cross_entropy(const Tensor& losses, const Tensor& dlogits, const Tensor& logits,
                     const Tensor& targets, double grad_scale) {
  const std::vector<double> X = load(logits);
  const std::vector<int32_t> t = load_i32(targets);
  const int64_t N = logits.rows, V = logits.cols;
  for (int32_t target : t)
    if (target >= V)
      fail("cross_entropy: target " + std::to_string(target) + " out of range for vocabulary " +
           std::to_string(V));
  std::vector<double> L(size_t(N), 0.0), dX(dlogits ? X.size() : 0, 0.0);
  double total = 0.0;
  for (int64_t n = 0; n < N; ++n) {
    if (t[size_t(n)] < 0) continue;  // ignored: loss 0, gradient row 0
    const double* x = &X[size_t(n * V)];
    const double m = row_max_of(x, V), sum = row_sum_exp(x, V, m);
    L[size_t(n)] = m + std::log(sum) - x[t[size_t(n)]];
    total += L[size_t(n)];
    if (dlogits) softmax_gradient(&dX[size_t(n * V)], x, V, m, sum, t[size_t(n)], 0, grad_scale);
  }
  store(losses, L);
  if (dlogits) store(dlogits, dX);
  return total;
}

void cross_entropy_row_max(const Tensor& row_max, const Tensor& logits, const Tensor& targets) {
  const std::vector<double> X = load(logits);
  const std::vector<int32_t> t = load_i32(targets);
  const int64_t N = logits.rows, V = logits.cols;
  std::vector<double> M(size_t(N), 0.0);
  for (int64_t n = 0; n < N; ++n)
    if (t[size_t(n)] >= 0) M[size_t(n)] = row_max_of(&X[size_t(n * V)], V);
  store(row_max, M);
}

void cross_entropy_row_sums(const Tensor& sums, const Tensor& logits, const Tensor& targets,
                            const Tensor& row_max, int64_t v0) {
  const std::vector<double> X = load(logits), M = load(row_max);
  const std::vector<int32_t> t = load_i32(targets);
  const int64_t N = logits.rows, V = logits.cols;
  std::vector<double> S(size_t(2 * N), 0.0);
  for (int64_t n = 0; n < N; ++n) {
    const int64_t target = t[size_t(n)];
    if (target < 0) continue;
    const double* x = &X[size_t(n * V)];
    S[size_t(n)] = row_sum_exp(x, V, M[size_t(n)]);
    if (target >= v0 && target < v0 + V) S[size_t(N + n)] = x[target - v0];
  }
  store(sums, S);
}

double cross_entropy_finish(const Tensor& losses, const Tensor& dlogits, const Tensor& logits,
                            const Tensor& targets, const Tensor& row_max, const Tensor& sums,
                            int64_t v0, double grad_scale) {
  const std::vector<double> X = load(logits), M = load(row_max), S = load(sums);
  const std::vector<int32_t> t = load_i32(targets);
  const int64_t N = logits.rows, V = logits.cols;
  std::vector<double> L(size_t(N), 0.0), dX(dlogits ? X.size() : 0, 0.0);
  double total = 0.0;
  for (int64_t n = 0; n < N; ++n) {
    if (t[size_t(n)] < 0) continue;
    const double m = M[size_t(n)], sum = S[size_t(n)];
    L[size_t(n)] = m + std::log(sum) - S[size_t(N + n)];
    total += L[size_t(n)];
    if (dlogits)
      softmax_gradient(&dX[size_t(n * V)], &X[size_t(n * V)], V, m, sum, t[size_t(n)], v0,
                       grad_scale);
  }
  store(losses, L);
  if (dlogits) store(dlogits, dX);
  return total;
}

}  // namespace mt::ref
