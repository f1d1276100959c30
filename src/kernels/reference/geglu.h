// Reference GeGLU: h = gelu_tanh(gate) * up, gelu_tanh(a) = a/2 (1 + tanh(k (a + 0.044715 a^3))),
// k = sqrt(2/pi), elementwise in double.
#pragma once
#include "core/tensor.h"

namespace mt::ref {

void geglu_forward(const Tensor& h, const Tensor& gate, const Tensor& up);
// dgate = dh * up * gelu_tanh'(gate), dup = dh * gelu_tanh(gate); both overwritten.
void geglu_backward(const Tensor& dgate, const Tensor& dup, const Tensor& dh, const Tensor& gate,
                    const Tensor& up);

}  // namespace mt::ref
