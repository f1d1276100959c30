#include "kernels/cpu/gelu.h"

#include <algorithm>

#include "core/bf16.h"
#include "kernels/cpu/fast_exp_block.h"
#include "kernels/cpu/gelu_sigmoid.h"

namespace mt {

namespace {
// e[j] = e^-2u of x[j] (gelu_sigmoid.h), j < len, the exp eight lanes at a time.
template <class T>
void gelu_exp_block(float* e, const T* x, int64_t len) {
#pragma omp simd
  for (int64_t j = 0; j < len; ++j) e[j] = gelu_exp_argument(to_float(x[j]));
  fast_exp_inplace(e, len);
}
}  // namespace

// gelu_sigmoid.h's form of the tanh GeLU: fast_exp instead of tanhf, so each loop vectorises.
template <class T>
void gelu_forward(T* h, const T* x, int64_t n) {
  for_each_exp_block(n, [&](int64_t i0, int64_t len) {
    float e[kExpBlock];
    gelu_exp_block(e, x + i0, len);
#pragma omp simd
    for (int64_t j = 0; j < len; ++j)
      h[i0 + j] = from_float<T>(to_float(x[i0 + j]) * gelu_sigmoid_from_exp(e[j]).s);
  });
}

template <class T>
void gelu_backward(T* dx, const T* dh, const T* x, int64_t n) {
  for_each_exp_block(n, [&](int64_t i0, int64_t len) {
    float e[kExpBlock];
    gelu_exp_block(e, x + i0, len);
#pragma omp simd
    for (int64_t j = 0; j < len; ++j) {
      const int64_t i = i0 + j;
      const float xi = to_float(x[i]);
      dx[i] = from_float<T>(to_float(dh[i]) *
                            gelu_tanh_derivative_vectorisable(xi, gelu_sigmoid_from_exp(e[j])));
    }
  });
}

#define MT_INSTANTIATE(T)                                    \
  template void gelu_forward<T>(T*, const T*, int64_t);      \
  template void gelu_backward<T>(T*, const T*, const T*, int64_t);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16)
#undef MT_INSTANTIATE

}  // namespace mt
