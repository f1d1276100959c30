#include "kernels/reference/nf4.h"

#include <vector>

#include "core/nf4.h"
#include "kernels/reference/values.h"

namespace mt::ref {

void dequantize_nf4(const Tensor& dst, const Tensor& src) {
  const auto& cb = nf4::codebook();
  std::vector<double> out(size_t(dst.numel()));
  const auto* bytes = static_cast<const uint8_t*>(src.data);
  for (int64_t r = 0; r < src.rows; ++r) {
    const nf4::RowView row{bytes + r * nf4::row_bytes(src.cols), src.cols};
    for (int64_t i = 0; i < src.cols; ++i) {
      // The row's blocks in groups_per_row equal groups, the last possibly shorter.
      const int64_t nb = nf4::blocks_per_row(src.cols), ng = nf4::groups_per_row(src.cols);
      const int64_t b = i / nf4::kBlock, g = b / ((nb + ng - 1) / ng);
      const double absmax = double(row.offset(g)) + double(row.scale(g)) * (int(row.qmax(b)) - 128);
      // The kernels round the maximum to float before multiplying; so does the oracle.
      out[size_t(r * src.cols + i)] = double(cb[row.code(i)]) * double(float(absmax));
    }
  }
  store(dst, out);
}

void quantize_nf4(const Tensor& dst, const Tensor& src) {
  const std::vector<double> in = load(src);
  const std::vector<float> values(in.begin(), in.end());
  nf4::quantize_rows(static_cast<uint8_t*>(dst.data), values.data(), dst.rows, dst.cols);
}

}  // namespace mt::ref
