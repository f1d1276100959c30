#include "kernels/reference/layout.h"

#include <cstring>
#include <vector>

#include "kernels/reference/values.h"

namespace mt::ref {

namespace {

// Element i of a tensor as raw bytes: layout ops move values without looking at them.
char* element(const Tensor& t, int64_t i) {
  return static_cast<char*>(t.data) + size_t(i) * dtype_size(t.dtype);
}

void copy_element(const Tensor& dst, int64_t di, const Tensor& src, int64_t si) {
  std::memcpy(element(dst, di), element(src, si), dtype_size(src.dtype));
}

}  // namespace

void residual_add(const Tensor& y, const Tensor& x, const Tensor& delta) {
  const std::vector<double> X = load(x), dX = load(delta);
  std::vector<double> Y(X.size());
  for (size_t i = 0; i < X.size(); ++i) Y[i] = X[i] + dX[i];
  store(y, Y);
}

void scale(const Tensor& x, double factor) {
  std::vector<double> X = load(x);
  for (double& v : X) v *= factor;
  store(x, X);
}

void convert(const Tensor& dst, const Tensor& src) {
  if (dst.dtype == src.dtype) {
    for (int64_t i = 0; i < src.numel(); ++i) copy_element(dst, i, src, i);
    return;
  }
  store(dst, load(src));  // exact into double, then float_to_bf16 or an exact widening
}

void split_columns(const Tensor& src, std::span<const Tensor> blocks) {
  for (int64_t r = 0; r < src.rows; ++r) {
    int64_t col = 0;
    for (const Tensor& b : blocks)
      for (int64_t c = 0; c < b.cols; ++c, ++col)
        copy_element(b, r * b.cols + c, src, r * src.cols + col);
  }
}

void concat_columns(const Tensor& dst, std::span<const Tensor> blocks) {
  for (int64_t r = 0; r < dst.rows; ++r) {
    int64_t col = 0;
    for (const Tensor& b : blocks)
      for (int64_t c = 0; c < b.cols; ++c, ++col)
        copy_element(dst, r * dst.cols + col, b, r * b.cols + c);
  }
}

void copy_box(const Tensor& src, const TensorBox& src_box, const Tensor& dst,
              const TensorBox& dst_box, const TensorBox& region) {
  check_region("copy_box", src_box, dst_box, region);
  if (region.empty()) return;
  const size_t rank = region.rank();
  // Row-major offset of a full-tensor index inside the buffer holding `box`.
  auto offset = [rank](const TensorBox& box, const std::vector<int64_t>& idx) {
    int64_t o = 0;
    for (size_t d = 0; d < rank; ++d) o = o * (box.end[d] - box.begin[d]) + (idx[d] - box.begin[d]);
    return o;
  };
  std::vector<int64_t> idx = region.begin;
  for (;;) {
    copy_element(dst, offset(dst_box, idx), src, offset(src_box, idx));
    size_t d = rank;  // odometer: the last dimension runs fastest
    while (d > 0 && ++idx[d - 1] == region.end[d - 1]) idx[d - 1] = region.begin[d - 1], --d;
    if (d == 0) return;
  }
}

}  // namespace mt::ref
