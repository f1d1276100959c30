#include "kernels/cpu/rmsnorm.h"

#include <cmath>

#include "core/bf16.h"
#include "kernels/cpu/rmsnorm_weight_grad.h"

namespace mt {

namespace {
constexpr int64_t kRmsnormParallelMin = 1 << 15;  // elements; below this a thread team costs more
}

template <class T>
void rmsnorm_forward(T* out, float* rstd, const float* x, const float* w, int64_t N, int64_t C,
                     float eps, float offset) {
#pragma omp parallel for schedule(static) if (N * C > kRmsnormParallelMin)
  for (int64_t n = 0; n < N; ++n) {
    const float* xr = x + n * C;
    double ss = 0.0;  // double: the mean of squares feeds every output of the row
#pragma omp simd reduction(+ : ss)
    for (int64_t c = 0; c < C; ++c) ss += double(xr[c]) * double(xr[c]);
    float r = float(1.0 / std::sqrt(ss / double(C) + double(eps)));
    rstd[n] = r;
    T* o = out + n * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) o[c] = from_float<T>(xr[c] * r * (offset + w[c]));
  }
}

// With xhat = x * rstd and g = dout * (offset + w):  dx = rstd * (g - xhat * mean(g * xhat)),
// dw = sum over rows of dout * xhat.
template <class T>
void rmsnorm_backward(float* dx, float* dw, const T* dout, const float* x, const float* w,
                      const float* rstd, int64_t N, int64_t C, float offset) {
#pragma omp parallel if (N * C > kRmsnormParallelMin)
  {
    // dx: rows are independent.
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      const float* xr = x + n * C;
      const T* gr = dout + n * C;
      const float r = rstd[n];
      double dot = 0.0;
#pragma omp simd reduction(+ : dot)
      for (int64_t c = 0; c < C; ++c) dot += double(to_float(gr[c]) * (offset + w[c])) * double(xr[c]);
      // mean(g * xhat) = rstd * dot / C, and xhat = x * rstd
      const float k = float(dot * double(r) * double(r) / double(C));
      float* d = dx + n * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) d[c] += r * (to_float(gr[c]) * (offset + w[c]) - xr[c] * k);
    }
    if (dw) rmsnorm_weight_grad_columns(dw, dout, x, rstd, N, C);  // rmsnorm_weight_grad.h
  }
}

#define MT_INSTANTIATE(T)                                                                      \
  template void rmsnorm_forward<T>(T*, float*, const float*, const float*, int64_t, int64_t,   \
                                   float, float);                                              \
  template void rmsnorm_backward<T>(float*, float*, const T*, const float*, const float*,      \
                                    const float*, int64_t, int64_t, float);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16)
#undef MT_INSTANTIATE

}  // namespace mt
