// RMSNorm over rows whose columns are split over devices (Backend::rmsnorm_row_dots and the
// summed forms; OLMoE's whole-projection q/k norm under tensor parallelism): the partial row sums
// a device contributes, and the norm finished from the sums over every device's columns.
#pragma once
#include <cstdint>

namespace mt {

// dots[n] = sum over c of x[n, c] * y[n, c] * (w ? offset + w[c] : 1), accumulated in double.
// x [N, C] f32, y [N, C] of T, w [C] or null.
template <class T>
void rmsnorm_row_dots(float* dots, const float* x, const T* y, const float* w, int64_t N, int64_t C,
                      float offset);
// rstd[n]: the row's sum of squares over `width` values on entry, 1 / sqrt(sum / width + eps) on
// exit; out [N, C] of T = x * rstd * (offset + w).
template <class T>
void rmsnorm_forward_summed(T* out, float* rstd, const float* x, const float* w, int64_t N, int64_t C,
                            int64_t width, float eps, float offset);
// dx += rstd * (g - x * rstd^2 * dots / width) with g = dout * (offset + w); dw += sum over rows of
// dout * x * rstd unless dw is null. dots[n]: rmsnorm_row_dots(x, dout, w) over the whole row.
template <class T>
void rmsnorm_backward_summed(float* dx, float* dw, const T* dout, const float* x, const float* w,
                             const float* rstd, const float* dots, int64_t N, int64_t C, int64_t width,
                             float offset);

}  // namespace mt
