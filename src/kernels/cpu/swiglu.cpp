#include "kernels/cpu/swiglu.h"

#include "core/bf16.h"
#include "kernels/cpu/fast_exp.h"
#include "kernels/device_math/swiglu_element.h"

namespace mt {

namespace {
constexpr int64_t kSwigluParallelMin = 1 << 15;
// The GPU computes the sigmoid with expf (dm::sigmoid); here fast_exp keeps the loop vectorised.
inline float sigmoid(float a) { return 1.0f / (1.0f + fast_exp(-a)); }
}  // namespace

// Each element's inputs are read before its outputs are written, so outputs may alias inputs
// element for element (the simd pragma promises no cross-element overlap, nothing more).
template <class T>
void swiglu_forward(T* h, const T* gate, const T* up, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kSwigluParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const float g = to_float(gate[i]), u = to_float(up[i]);
    h[i] = from_float<T>(dm::swiglu_value(g, u, sigmoid(g)));
  }
}

// The arithmetic after the sigmoid is kernels/device_math/swiglu_element.h, shared with the GPU.
template <class T>
void swiglu_backward(T* dgate, T* dup, const T* dh, const T* gate, const T* up, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kSwigluParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const float g = to_float(gate[i]), u = to_float(up[i]), d = to_float(dh[i]);
    const dm::SwigluGrads r = dm::swiglu_grads(g, u, d, sigmoid(g));
    dgate[i] = from_float<T>(r.dgate);
    dup[i] = from_float<T>(r.dup);
  }
}

#define MT_INSTANTIATE(T)                                                     \
  template void swiglu_forward<T>(T*, const T*, const T*, int64_t);           \
  template void swiglu_backward<T>(T*, T*, const T*, const T*, const T*, int64_t);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16)
#undef MT_INSTANTIATE

}  // namespace mt
