// Where a backend puts the dequantised copy of a packed (nf4) weight for one GEMM: one buffer,
// grown to the largest weight seen and reused by every later product, so a 4-bit base never has
// more than one matrix in bf16 at a time (no whole-model bf16 copy). A backend for another device
// keeps one too and only adds its dequantising `convert` kernel.
#pragma once
#include "backend/backend.h"
#include "backend/device_buffer.h"

namespace mt {

class DequantScratch {
 public:
  // `packed` converted to `to` (f32 or bf16) by backend.convert, valid until the next call.
  Tensor operator()(Backend& backend, const Tensor& packed, DType to);
  size_t bytes() const { return buffer_.bytes(); }

 private:
  DeviceBuffer buffer_;
};

}  // namespace mt
