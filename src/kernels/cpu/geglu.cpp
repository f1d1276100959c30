#include "kernels/cpu/geglu.h"

#include "core/bf16.h"
#include "kernels/device_math/gelu_element.h"

namespace mt {

namespace {
constexpr int64_t kGegluParallelMin = 1 << 15;  // elements; below this a thread team costs more
}

template <class T>
void geglu_forward(T* h, const T* gate, const T* up, int64_t n) {
#pragma omp parallel for schedule(static) if (n > kGegluParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const float g = to_float(gate[i]), u = to_float(up[i]);
    h[i] = from_float<T>(dm::gelu_tanh(g) * u);
  }
}

// dgate = dh * up * gelu'(gate), dup = dh * gelu(gate).
template <class T>
void geglu_backward(T* dgate, T* dup, const T* dh, const T* gate, const T* up, int64_t n) {
#pragma omp parallel for schedule(static) if (n > kGegluParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const float g = to_float(gate[i]), u = to_float(up[i]), d = to_float(dh[i]);
    const float gelu = dm::gelu_tanh(g), slope = dm::gelu_tanh_derivative(g);
    dgate[i] = from_float<T>(d * u * slope);
    dup[i] = from_float<T>(d * gelu);
  }
}

#define MT_INSTANTIATE(T)                                                    \
  template void geglu_forward<T>(T*, const T*, const T*, int64_t);           \
  template void geglu_backward<T>(T*, T*, const T*, const T*, const T*, int64_t);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16)
#undef MT_INSTANTIATE

}  // namespace mt
