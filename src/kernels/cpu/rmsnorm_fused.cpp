#include "kernels/cpu/rmsnorm_fused.h"

#include "core/bf16.h"
#include "kernels/cpu/rmsnorm_rows.h"
#include "kernels/cpu/rmsnorm_weight_grad.h"

namespace mt {

namespace {
constexpr int64_t kParallelMin = 1 << 15;  // elements, as rmsnorm.cpp: below this a thread team costs more
}

template <class T>
void residual_rmsnorm_forward(float* y, T* out, float* rstd, const float* x, const T* delta, const float* w,
                              int64_t N, int64_t C, float eps, float offset) {
#pragma omp parallel for schedule(static) if (N * C > kParallelMin)
  for (int64_t n = 0; n < N; ++n) {
    float* yr = y + n * C;
    const float* xr = x + n * C;
    const T* dr = delta + n * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) yr[c] = xr[c] + to_float(dr[c]);
    // The row just written is still in L1 (C f32: 3 KB at 768, 8 KB at 2048): the norm reads it
    // from there, not from memory as the separate rmsnorm_forward does.
    rstd[n] = rmsnorm_forward_row(out + n * C, yr, w, C, eps, offset);
  }
}

template <class T>
void rmsnorm_backward_convert(float* dx, T* dx_c, float* dw, const T* dout, const float* x, const float* w,
                              const float* rstd, int64_t N, int64_t C, float offset) {
#pragma omp parallel if (N * C > kParallelMin)
  {
    // The weight gradient first, while dout is whole (dx_c may overwrite it below).
    if (dw) {
      rmsnorm_weight_grad_columns(dw, dout, x, rstd, N, C);  // rmsnorm_weight_grad.h
#pragma omp barrier
    }
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      float* d = dx + n * C;
      rmsnorm_backward_row(d, dout + n * C, x + n * C, w, rstd[n], C, offset);  // rmsnorm_rows.h
      T* o = dx_c + n * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) o[c] = from_float<T>(d[c]);  // the row is still in L1
    }
  }
}

#define MT_INSTANTIATE(T)                                                                                   \
  template void residual_rmsnorm_forward<T>(float*, T*, float*, const float*, const T*, const float*, int64_t, \
                                            int64_t, float, float);                                         \
  template void rmsnorm_backward_convert<T>(float*, T*, float*, const T*, const float*, const float*,        \
                                            const float*, int64_t, int64_t, float);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16)
#undef MT_INSTANTIATE

}  // namespace mt
