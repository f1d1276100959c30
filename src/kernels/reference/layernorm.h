// Reference LayerNorm with weight and bias: y = (x - m) * r * w + b per row, m the mean,
// r = 1 / sqrt(mean((x - m)^2) + eps), in double.
#pragma once
#include "core/tensor.h"

namespace mt::ref {

// x f32 [N, C], w and b f32 (C elements), out [N, C] f32 or bf16, mean and rstd f32 [N].
void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                       const Tensor& w, const Tensor& b, double eps);
// dx += gradient wrt x; dw, db += gradients wrt w, b unless empty. Uses the saved mean and rstd.
void layernorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dout,
                        const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd);

}  // namespace mt::ref
