// RMSNorm: y = x / sqrt(mean(x^2) + eps) * (offset + w) (offset: Gemma's 1, else 0). The input x is the f32 residual stream, the weight
// is f32 (norm weights are tiny; they stay in the master precision), the output is the compute
// type T that feeds the next GEMM.
#pragma once
#include <cstdint>

namespace mt {

// x: [N, C] f32, w: [C], out: [N, C] of T, rstd: [N] (saved for backward)
template <class T>
void rmsnorm_forward(T* out, float* rstd, const float* x, const float* w, int64_t N, int64_t C,
                     float eps, float offset = 0.0f);
// dx += (gradient wrt x); dw += (gradient wrt w) unless dw is null (frozen weight).
// dout: [N, C] of T. dx is the f32 residual gradient, accumulated into (not overwritten).
template <class T>
void rmsnorm_backward(float* dx, float* dw, const T* dout, const float* x, const float* w,
                      const float* rstd, int64_t N, int64_t C, float offset = 0.0f);

}  // namespace mt
