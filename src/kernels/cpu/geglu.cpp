#include "kernels/cpu/geglu.h"

#include "core/bf16.h"
#include "kernels/cpu/gelu_sigmoid.h"

namespace mt {

namespace {
constexpr int64_t kGegluParallelMin = 1 << 15;  // elements; below this a thread team costs more
}

template <class T>
void geglu_forward(T* h, const T* gate, const T* up, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kGegluParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const float g = to_float(gate[i]), u = to_float(up[i]);
    h[i] = from_float<T>(gelu_tanh_vectorisable(g) * u);
  }
}

// dgate = dh * up * gelu'(gate), dup = dh * gelu(gate).
template <class T>
void geglu_backward(T* dgate, T* dup, const T* dh, const T* gate, const T* up, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kGegluParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const float g = to_float(gate[i]), u = to_float(up[i]), d = to_float(dh[i]);
    const GeluSigmoid sg = gelu_sigmoid(g);
    dgate[i] = from_float<T>(d * u * gelu_tanh_derivative_vectorisable(g, sg));
    dup[i] = from_float<T>(d * g * sg.s);
  }
}

#define MT_INSTANTIATE(T)                                                    \
  template void geglu_forward<T>(T*, const T*, const T*, int64_t);           \
  template void geglu_backward<T>(T*, T*, const T*, const T*, const T*, int64_t);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16)
#undef MT_INSTANTIATE

}  // namespace mt
