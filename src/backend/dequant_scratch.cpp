#include "backend/dequant_scratch.h"

namespace mt {

Tensor DequantScratch::operator()(Backend& backend, const Tensor& packed, DType to) {
  const int64_t words = (packed.numel() * int64_t(dtype_size(to)) + 3) / 4;
  if (buffer_.numel() < words) buffer_.resize(backend, DType::f32, words);
  const Tensor out = backend.view(buffer_.data(), to, packed.rows, packed.cols);
  backend.convert(out, packed);
  return out;
}

}  // namespace mt
