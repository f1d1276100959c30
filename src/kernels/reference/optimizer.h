// Reference optimizer math: the AdamW step and the sum of squares behind gradient clipping.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace mt::ref {

struct AdamWStep {
  double lr, beta1, beta2, eps, weight_decay;
  int64_t t;          // 1-based step (bias correction)
  double grad_scale;  // multiplies every gradient first
  bool decay;         // apply the weight decay to this tensor
};

// torch.optim.AdamW on f32 master, grad, m, v (m and v updated); master16 (bf16, may be empty)
// is set to the rounded new master.
void adamw_update(const Tensor& master, const Tensor& master16, const Tensor& grad,
                  const Tensor& m, const Tensor& v, const AdamWStep& s);

// Sum of x^2 over an f32 tensor, each square and the running sum in double.
double sum_squares(const Tensor& x);

}  // namespace mt::ref
