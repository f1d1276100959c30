// Reference RMSNorm: y = x * r * (weight_offset + w) per row, r = 1 / sqrt(mean(x^2) + eps), in
// double (the offset is Gemma's 1, else 0).
#pragma once
#include "core/tensor.h"

namespace mt::ref {

// x f32 [N, C], w f32 (C elements), out [N, C] f32 or bf16, rstd f32 [N] (r of each row).
void rmsnorm_forward(const Tensor& out, const Tensor& rstd, const Tensor& x, const Tensor& w,
                     double eps, double weight_offset);
// dx += gradient wrt x; dw += gradient wrt w unless dw is empty. Uses the saved rstd (eps is not
// an argument of the backward, and r is all the derivative needs).
void rmsnorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& dout, const Tensor& x,
                      const Tensor& w, const Tensor& rstd, double weight_offset);

}  // namespace mt::ref
