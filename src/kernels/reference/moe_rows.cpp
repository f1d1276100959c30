#include "kernels/reference/moe_rows.h"

#include <vector>

#include "kernels/reference/values.h"

namespace mt::ref {

void gather_rows(const Tensor& dst, const Tensor& src, const Tensor& rows) {
  const std::vector<double> S = load(src);
  const std::vector<int32_t> idx = load_i32(rows);
  const int64_t C = dst.cols;
  std::vector<double> D(size_t(dst.numel()), 0.0);
  for (int64_t i = 0; i < dst.rows; ++i) {
    const int64_t r = idx[size_t(i)];
    if (r < 0 || r >= src.rows) continue;
    for (int64_t c = 0; c < C; ++c) D[size_t(i * C + c)] = S[size_t(r * C + c)];
  }
  store(dst, D);
}

void combine_rows(const Tensor& out, const Tensor& src, const Tensor& slots, const Tensor& weights,
                  int64_t k, bool accumulate) {
  const std::vector<double> S = load(src);
  const std::vector<int32_t> slot = load_i32(slots);
  const std::vector<double> W = weights ? load(weights) : std::vector<double>(slot.size(), 1.0);
  std::vector<double> O = accumulate ? load(out) : std::vector<double>(size_t(out.numel()), 0.0);
  const int64_t C = out.cols;
  for (int64_t n = 0; n < out.rows; ++n)
    for (int64_t j = 0; j < k; ++j) {
      const int64_t r = slot[size_t(n * k + j)];
      if (r < 0 || r >= src.rows) continue;
      const double w = W[size_t(n * k + j)];
      for (int64_t c = 0; c < C; ++c) O[size_t(n * C + c)] += w * S[size_t(r * C + c)];
    }
  store(out, O);
}

void combine_rows_backward(const Tensor& dsrc, const Tensor& dweights, const Tensor& dout,
                           const Tensor& src, const Tensor& slots, const Tensor& weights, int64_t k) {
  const std::vector<double> dO = load(dout), S = load(src), W = load(weights);
  const std::vector<int32_t> slot = load_i32(slots);
  std::vector<double> dS = load(dsrc), dW(slot.size(), 0.0);
  const int64_t C = dout.cols;
  for (int64_t n = 0; n < dout.rows; ++n)
    for (int64_t j = 0; j < k; ++j) {
      const int64_t r = slot[size_t(n * k + j)];
      if (r < 0 || r >= src.rows) continue;
      const double w = W[size_t(n * k + j)];
      double dot = 0.0;
      for (int64_t c = 0; c < C; ++c) {
        dS[size_t(r * C + c)] = w * dO[size_t(n * C + c)];
        dot += dO[size_t(n * C + c)] * S[size_t(r * C + c)];
      }
      dW[size_t(n * k + j)] = dot;
    }
  store(dsrc, dS);
  store(dweights, dW);
}

}  // namespace mt::ref
