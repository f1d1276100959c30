// LayerNorm with a weight and a bias (GPT-2's ln_1, ln_2, ln_f):
//   y = (x - mean(x)) * rstd * w + b,  rstd = 1 / sqrt(var(x) + eps)  (biased variance, as torch).
// x is the f32 residual stream, w and b are f32 (master precision like every norm), the output is
// the compute type T that feeds the next GEMM.
#pragma once
#include <cstdint>

namespace mt {

// x: [N, C] f32, w, b: [C], out: [N, C] of T; mean, rstd: [N] (saved for backward).
template <class T>
void layernorm_forward(T* out, float* mean, float* rstd, const float* x, const float* w,
                       const float* b, int64_t N, int64_t C, float eps);
// dx += (gradient wrt x); dw, db += (gradients wrt w, b) unless null (a frozen norm).
// dout: [N, C] of T.
template <class T>
void layernorm_backward(float* dx, float* dw, float* db, const T* dout, const float* x,
                        const float* w, const float* mean, const float* rstd, int64_t N, int64_t C);

}  // namespace mt
