#include "kernels/reference/embedding.h"

#include <vector>

#include "kernels/reference/values.h"

namespace mt::ref {

void embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& table,
                       int64_t row0) {
  const std::vector<double> W = load(table);
  const std::vector<int32_t> tok = load_i32(tokens);
  const int64_t C = out.cols;
  std::vector<double> O(size_t(out.numel()), 0.0);
  for (int64_t n = 0; n < out.rows; ++n) {
    const int64_t r = tok[size_t(n)] - row0;
    if (r < 0 || r >= table.rows) continue;  // another device's row: this one adds zeros
    for (int64_t c = 0; c < C; ++c) O[size_t(n * C + c)] = W[size_t(r * C + c)];
  }
  store(out, O);
}

void embedding_backward(const Tensor& dtable, const Tensor& tokens, const Tensor& dout,
                        int64_t row0) {
  std::vector<double> dW = load(dtable);
  const std::vector<double> dO = load(dout);
  const std::vector<int32_t> tok = load_i32(tokens);
  const int64_t C = dout.cols;
  for (int64_t n = 0; n < dout.rows; ++n) {
    const int64_t r = tok[size_t(n)] - row0;
    if (r < 0 || r >= dtable.rows) continue;
    for (int64_t c = 0; c < C; ++c) dW[size_t(r * C + c)] += dO[size_t(n * C + c)];
  }
  store(dtable, dW);
}

}  // namespace mt::ref
