// The RMSNorm fused with its neighbours in the block (Backend::residual_rmsnorm_forward and
// rmsnorm_backward_convert): each row is read from memory once instead of twice. They run the
// plain kernels' row loops (rmsnorm_rows.h), so they leave residual_add + rmsnorm_forward's and
// rmsnorm_backward + convert's bits.
#pragma once
#include <cstdint>

namespace mt {

// y = x + delta (y may be x), then out = y / rms(y) * (offset + w), rstd saved. x, y [N, C] f32;
// delta and out [N, C] of T; w [C]; rstd [N].
template <class T>
void residual_rmsnorm_forward(float* y, T* out, float* rstd, const float* x, const T* delta, const float* w,
                              int64_t N, int64_t C, float eps, float offset = 0.0f);
// rmsnorm_backward (dx += the input gradient, dw += the weight gradient unless null), then
// dx_c = dx rounded to T. dx_c may be dout: dw is summed before any row of dx_c is written.
template <class T>
void rmsnorm_backward_convert(float* dx, T* dx_c, float* dw, const T* dout, const float* x, const float* w,
                              const float* rstd, int64_t N, int64_t C, float offset = 0.0f);

}  // namespace mt
