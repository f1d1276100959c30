// NF4 (core/nf4.h) read independently of the CPU kernel: each weight is code value times the
// block's double-quantised maximum, computed in double from the record's fields.
#pragma once
#include "core/tensor.h"

namespace mt::ref {

// dst (f32 or bf16, same shape) = the nf4 tensor src dequantised.
void dequantize_nf4(const Tensor& dst, const Tensor& src);
// dst (nf4) = src (f32 or bf16) quantised; there is one way to quantise, core/nf4's.
void quantize_nf4(const Tensor& dst, const Tensor& src);

}  // namespace mt::ref
