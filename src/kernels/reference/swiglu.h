// Reference SwiGLU: h = silu(gate) * up, silu(a) = a * sigmoid(a), elementwise in double.
#pragma once
#include "core/tensor.h"

namespace mt::ref {

void swiglu_forward(const Tensor& h, const Tensor& gate, const Tensor& up);
// dgate = dh * up * silu'(gate), dup = dh * silu(gate); both overwritten.
void swiglu_backward(const Tensor& dgate, const Tensor& dup, const Tensor& dh, const Tensor& gate,
                     const Tensor& up);

}  // namespace mt::ref
