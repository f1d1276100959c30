#include "kernels/cpu/layernorm.h"

#include <cmath>
#include <vector>

#include <omp.h>

#include "core/bf16.h"
#include "kernels/cpu/col_range.h"

namespace mt {

namespace {
constexpr int64_t kLayernormParallelMin = 1 << 15;  // elements; below this a thread team costs more
}

template <class T>
void layernorm_forward(T* out, float* mean, float* rstd, const float* x, const float* w,
                       const float* b, int64_t N, int64_t C, float eps) {
#pragma omp parallel for schedule(static) if (N * C > kLayernormParallelMin)
  for (int64_t n = 0; n < N; ++n) {
    const float* xr = x + n * C;
    // Two passes in double: the mean, then the variance about it (no cancellation of E[x^2] - m^2).
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (int64_t c = 0; c < C; ++c) s += double(xr[c]);
    const double m = s / double(C);
    double ss = 0.0;
#pragma omp simd reduction(+ : ss)
    for (int64_t c = 0; c < C; ++c) ss += (double(xr[c]) - m) * (double(xr[c]) - m);
    const float r = float(1.0 / std::sqrt(ss / double(C) + double(eps)));
    const float mf = float(m);
    mean[n] = mf;
    rstd[n] = r;
    T* o = out + n * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) o[c] = from_float<T>((xr[c] - mf) * r * w[c] + b[c]);
  }
}

// With xhat = (x - mean) * rstd and g = dout * w:
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),  dw = sum over rows of dout * xhat,
//   db = sum over rows of dout.
template <class T>
void layernorm_backward(float* dx, float* dw, float* db, const T* dout, const float* x,
                        const float* w, const float* mean, const float* rstd, int64_t N,
                        int64_t C) {
#pragma omp parallel if (N * C > kLayernormParallelMin)
  {
    // dx: rows are independent.
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      const float* xr = x + n * C;
      const T* gr = dout + n * C;
      const float m = mean[n], r = rstd[n];
      double g_sum = 0.0, gx_sum = 0.0;
#pragma omp simd reduction(+ : g_sum, gx_sum)
      for (int64_t c = 0; c < C; ++c) {
        const double g = double(to_float(gr[c]) * w[c]);
        g_sum += g;
        gx_sum += g * double((xr[c] - m) * r);
      }
      const float g_mean = float(g_sum / double(C)), gx_mean = float(gx_sum / double(C));
      float* d = dx + n * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c)
        d[c] += r * (to_float(gr[c]) * w[c] - g_mean - (xr[c] - m) * r * gx_mean);
    }
    // dw, db: every row adds to the same C sums, so threads split the columns instead (see
    // col_range.h) and accumulate in double in row order (deterministic).
    if (dw || db) {
      ColRange cr = col_range(C, omp_get_thread_num(), omp_get_num_threads());
      const int64_t width = cr.end - cr.begin;
      std::vector<double> acc_w(size_t(width), 0.0), acc_b(size_t(width), 0.0);
      double *aw = acc_w.data(), *ab = acc_b.data();
      for (int64_t n = 0; n < N; ++n) {
        const float* xr = x + n * C + cr.begin;
        const T* gr = dout + n * C + cr.begin;
        const float m = mean[n], r = rstd[n];
#pragma omp simd
        for (int64_t c = 0; c < width; ++c) {
          const double g = double(to_float(gr[c]));
          aw[c] += g * double((xr[c] - m) * r);
          ab[c] += g;
        }
      }
      for (int64_t c = 0; c < width; ++c) {
        if (dw) dw[cr.begin + c] += float(aw[c]);
        if (db) db[cr.begin + c] += float(ab[c]);
      }
    }
  }
}

#define MT_INSTANTIATE(T)                                                                      \
  template void layernorm_forward<T>(T*, float*, float*, const float*, const float*,           \
                                     const float*, int64_t, int64_t, float);                   \
  template void layernorm_backward<T>(float*, float*, float*, const T*, const float*,          \
                                      const float*, const float*, const float*, int64_t, int64_t);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16)
#undef MT_INSTANTIATE

}  // namespace mt
