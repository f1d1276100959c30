#include "kernels/cpu/gelu.h"

#include "core/bf16.h"
#include "kernels/cpu/gelu_sigmoid.h"

namespace mt {

namespace {
constexpr int64_t kGeluParallelMin = 1 << 15;  // elements; below this a thread team costs more
}

// gelu_sigmoid.h's form of the tanh GeLU: fast_exp instead of tanhf, so each loop vectorises.
template <class T>
void gelu_forward(T* h, const T* x, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kGeluParallelMin)
  for (int64_t i = 0; i < n; ++i) h[i] = from_float<T>(gelu_tanh_vectorisable(to_float(x[i])));
}

template <class T>
void gelu_backward(T* dx, const T* dh, const T* x, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kGeluParallelMin)
  for (int64_t i = 0; i < n; ++i)
    dx[i] = from_float<T>(to_float(dh[i]) * gelu_tanh_derivative_vectorisable(to_float(x[i])));
}

#define MT_INSTANTIATE(T)                                    \
  template void gelu_forward<T>(T*, const T*, int64_t);      \
  template void gelu_backward<T>(T*, const T*, const T*, int64_t);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16)
#undef MT_INSTANTIATE

}  // namespace mt
