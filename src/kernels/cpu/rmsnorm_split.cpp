#include "kernels/cpu/rmsnorm_split.h"

#include <cmath>

#include "core/bf16.h"
#include "kernels/cpu/rmsnorm_weight_grad.h"

namespace mt {

namespace {
constexpr int64_t kSplitNormParallelMin = 1 << 15;  // elements; below this a thread team costs more
}

template <class T>
void rmsnorm_row_dots(float* dots, const float* x, const T* y, const float* w, int64_t N, int64_t C,
                      float offset) {
#pragma omp parallel for schedule(static) if (N * C > kSplitNormParallelMin)
  for (int64_t n = 0; n < N; ++n) {
    const float* xr = x + n * C;
    const T* yr = y + n * C;
    double s = 0.0;  // double, as rmsnorm_forward's own sum: the rows' sums are added across devices
    if (w) {
#pragma omp simd reduction(+ : s)
      for (int64_t c = 0; c < C; ++c) s += double(to_float(yr[c]) * (offset + w[c])) * double(xr[c]);
    } else {
#pragma omp simd reduction(+ : s)
      for (int64_t c = 0; c < C; ++c) s += double(xr[c]) * double(to_float(yr[c]));
    }
    dots[n] = float(s);
  }
}

template <class T>
void rmsnorm_forward_summed(T* out, float* rstd, const float* x, const float* w, int64_t N, int64_t C,
                            int64_t width, float eps, float offset) {
#pragma omp parallel for schedule(static) if (N * C > kSplitNormParallelMin)
  for (int64_t n = 0; n < N; ++n) {
    const float r = float(1.0 / std::sqrt(double(rstd[n]) / double(width) + double(eps)));
    rstd[n] = r;
    const float* xr = x + n * C;
    T* o = out + n * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) o[c] = from_float<T>(xr[c] * r * (offset + w[c]));
  }
}

template <class T>
void rmsnorm_backward_summed(float* dx, float* dw, const T* dout, const float* x, const float* w,
                             const float* rstd, const float* dots, int64_t N, int64_t C, int64_t width,
                             float offset) {
#pragma omp parallel if (N * C > kSplitNormParallelMin)
  {
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      const float* xr = x + n * C;
      const T* gr = dout + n * C;
      const float r = rstd[n];
      const float k = float(double(dots[n]) * double(r) * double(r) / double(width));
      float* d = dx + n * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) d[c] += r * (to_float(gr[c]) * (offset + w[c]) - xr[c] * k);
    }
    if (dw) rmsnorm_weight_grad_columns(dw, dout, x, rstd, N, C);  // rmsnorm_weight_grad.h
  }
}

#define MT_INSTANTIATE(T)                                                                             \
  template void rmsnorm_row_dots<T>(float*, const float*, const T*, const float*, int64_t, int64_t, float); \
  template void rmsnorm_forward_summed<T>(T*, float*, const float*, const float*, int64_t, int64_t, int64_t, \
                                          float, float);                                              \
  template void rmsnorm_backward_summed<T>(float*, float*, const T*, const float*, const float*, const float*, \
                                           const float*, int64_t, int64_t, int64_t, float);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16)
#undef MT_INSTANTIATE

}  // namespace mt
