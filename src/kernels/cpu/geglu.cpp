#include "kernels/cpu/geglu.h"

#include <algorithm>

#include "core/bf16.h"
#include "kernels/cpu/fast_exp_block.h"
#include "kernels/cpu/gelu_sigmoid.h"

namespace mt {

namespace {
// e[j] = e^-2u of gate[j] (gelu_sigmoid.h), j < len, the exp eight lanes at a time.
template <class T>
void geglu_exp_block(float* e, const T* gate, int64_t len) {
#pragma omp simd
  for (int64_t j = 0; j < len; ++j) e[j] = gelu_exp_argument(to_float(gate[j]));
  fast_exp_inplace(e, len);
}
}  // namespace

template <class T>
void geglu_forward(T* h, const T* gate, const T* up, int64_t n) {
  for_each_exp_block(n, [&](int64_t i0, int64_t len) {
    float e[kExpBlock];
    geglu_exp_block(e, gate + i0, len);
#pragma omp simd
    for (int64_t j = 0; j < len; ++j) {
      const int64_t i = i0 + j;
      const float g = to_float(gate[i]), u = to_float(up[i]);
      h[i] = from_float<T>(g * gelu_sigmoid_from_exp(e[j]).s * u);
    }
  });
}

// dgate = dh * up * gelu'(gate), dup = dh * gelu(gate).
template <class T>
void geglu_backward(T* dgate, T* dup, const T* dh, const T* gate, const T* up, int64_t n) {
  for_each_exp_block(n, [&](int64_t i0, int64_t len) {
    float e[kExpBlock];
    geglu_exp_block(e, gate + i0, len);
#pragma omp simd
    for (int64_t j = 0; j < len; ++j) {
      const int64_t i = i0 + j;
      const float g = to_float(gate[i]), u = to_float(up[i]), d = to_float(dh[i]);
      // sg made twice from e[j], not kept in a local struct: with one, g++ left this loop scalar.
      const float ej = e[j];
      dgate[i] =
          from_float<T>(d * u * gelu_tanh_derivative_vectorisable(g, gelu_sigmoid_from_exp(ej)));
      dup[i] = from_float<T>(d * g * gelu_sigmoid_from_exp(ej).s);
    }
  });
}

#define MT_INSTANTIATE(T)                                                    \
  template void geglu_forward<T>(T*, const T*, const T*, int64_t);           \
  template void geglu_backward<T>(T*, T*, const T*, const T*, const T*, int64_t);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16)
#undef MT_INSTANTIATE

}  // namespace mt
