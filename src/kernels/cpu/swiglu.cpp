#include "kernels/cpu/swiglu.h"

#include <algorithm>

#include "core/bf16.h"
#include "kernels/cpu/fast_exp_block.h"
#include "kernels/device_math/swiglu_element.h"

namespace mt {

namespace {
// s[j] = sigmoid(gate[j]) = 1 / (1 + fast_exp(-gate[j])), j < len. The GPU computes the sigmoid
// with expf (dm::sigmoid); fast_exp_inplace runs eight lanes at a time on any x86-64 (a loop
// calling fast_exp does not vectorise on AVX2, see fast_exp_block.h).
template <class T>
void sigmoid_block(float* s, const T* gate, int64_t len) {
#pragma omp simd
  for (int64_t j = 0; j < len; ++j) s[j] = -to_float(gate[j]);
  fast_exp_inplace(s, len);
#pragma omp simd
  for (int64_t j = 0; j < len; ++j) s[j] = 1.0f / (1.0f + s[j]);
}
}  // namespace

// Each element's inputs are read before its outputs are written, so outputs may alias inputs
// element for element (the simd pragmas promise no cross-element overlap, nothing more).
template <class T>
void swiglu_forward(T* h, const T* gate, const T* up, int64_t n) {
  for_each_exp_block(n, [&](int64_t i0, int64_t len) {
    float s[kExpBlock];
    sigmoid_block(s, gate + i0, len);
#pragma omp simd
    for (int64_t j = 0; j < len; ++j) {
      const int64_t i = i0 + j;
      h[i] = from_float<T>(dm::swiglu_value(to_float(gate[i]), to_float(up[i]), s[j]));
    }
  });
}

// The arithmetic after the sigmoid is kernels/device_math/swiglu_element.h, shared with the GPU.
template <class T>
void swiglu_backward(T* dgate, T* dup, const T* dh, const T* gate, const T* up, int64_t n) {
  for_each_exp_block(n, [&](int64_t i0, int64_t len) {
    float s[kExpBlock];
    sigmoid_block(s, gate + i0, len);
#pragma omp simd
    for (int64_t j = 0; j < len; ++j) {
      const int64_t i = i0 + j;
      const float g = to_float(gate[i]), u = to_float(up[i]), d = to_float(dh[i]);
      const dm::SwigluGrads r = dm::swiglu_grads(g, u, d, s[j]);
      dgate[i] = from_float<T>(r.dgate);
      dup[i] = from_float<T>(r.dup);
    }
  });
}

#define MT_INSTANTIATE(T)                                                     \
  template void swiglu_forward<T>(T*, const T*, const T*, int64_t);           \
  template void swiglu_backward<T>(T*, T*, const T*, const T*, const T*, int64_t);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16)
#undef MT_INSTANTIATE

}  // namespace mt
