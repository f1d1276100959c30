// Reference GeLU, tanh approximation (GPT-2's gelu_new), elementwise in double:
//   gelu(x) = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
#pragma once
#include "core/tensor.h"

namespace mt::ref {

void gelu_forward(const Tensor& h, const Tensor& x);
// dx = dh * gelu'(x), overwritten.
void gelu_backward(const Tensor& dx, const Tensor& dh, const Tensor& x);

}  // namespace mt::ref
