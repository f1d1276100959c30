#include "kernels/cpu/rmsnorm.h"

#include "core/bf16.h"
#include "kernels/cpu/rmsnorm_rows.h"
#include "kernels/cpu/rmsnorm_weight_grad.h"

namespace mt {

namespace {
constexpr int64_t kRmsnormParallelMin = 1 << 15;  // elements; below this a thread team costs more
}

template <class T>
void rmsnorm_forward(T* out, float* rstd, const float* x, const float* w, int64_t N, int64_t C,
                     float eps, float offset) {
#pragma omp parallel for schedule(static) if (N * C > kRmsnormParallelMin)
  for (int64_t n = 0; n < N; ++n) rstd[n] = rmsnorm_forward_row(out + n * C, x + n * C, w, C, eps, offset);
}

// dx as rmsnorm_rows.h; dw = sum over rows of dout * x * rstd.
template <class T>
void rmsnorm_backward(float* dx, float* dw, const T* dout, const float* x, const float* w,
                      const float* rstd, int64_t N, int64_t C, float offset) {
#pragma omp parallel if (N * C > kRmsnormParallelMin)
  {
    // dx: rows are independent.
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n)
      rmsnorm_backward_row(dx + n * C, dout + n * C, x + n * C, w, rstd[n], C, offset);  // rmsnorm_rows.h
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
