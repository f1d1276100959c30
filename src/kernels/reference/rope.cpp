#include "kernels/reference/rope.h"

#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/reference/values.h"

namespace mt::ref {

namespace {

// [lo', hi'] = [[c, -s], [s, c]] [lo, hi] with s = direction * sin(angle).
void rotate(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& positions,
            int64_t heads, double direction) {
  std::vector<double> X = load(x);
  const std::vector<double> cs = load(cos), sn = load(sin);
  const std::vector<int32_t> pos = load_i32(positions);
  const int64_t D = x.cols / heads, half = D / 2, max_pos = cos.numel() / half;
  for (int64_t n = 0; n < x.rows; ++n) {
    const int64_t p = pos[size_t(n)];
    if (p < 0 || p >= max_pos)
      fail("rope: position " + std::to_string(p) + " outside the tables of " +
           std::to_string(max_pos) + " positions");
    for (int64_t h = 0; h < heads; ++h) {
      double* head = &X[size_t((n * heads + h) * D)];
      for (int64_t i = 0; i < half; ++i) {
        const double c = cs[size_t(p * half + i)], s = direction * sn[size_t(p * half + i)];
        const double lo = head[i], hi = head[i + half];
        head[i] = lo * c - hi * s;
        head[i + half] = hi * c + lo * s;
      }
    }
  }
  store(x, X);
}

}  // namespace

void rope_forward(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& positions,
                  int64_t heads) {
  rotate(x, cos, sin, positions, heads, 1.0);
}

void rope_backward(const Tensor& dx, const Tensor& cos, const Tensor& sin,
                   const Tensor& positions, int64_t heads) {
  rotate(dx, cos, sin, positions, heads, -1.0);
}

}  // namespace mt::ref
