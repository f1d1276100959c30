#include "kernels/cuda/swiglu.h"

#include "kernels/cuda/launch.h"
#include "kernels/device_math/swiglu_element.h"

namespace mt::cuda {

namespace {

// Each element's inputs are read before its outputs are written: outputs may alias inputs.
template <class T>
__global__ void swiglu_forward_kernel(T* h, const T* gate, const T* up, int64_t n) {
  for (int64_t i = global_index(); i < n; i += global_stride()) {
    const float g = load(gate[i]), u = load(up[i]);
    h[i] = store<T>(dm::swiglu_value(g, u, dm::sigmoid(g)));
  }
}

template <class T>
__global__ void swiglu_backward_kernel(T* dgate, T* dup, const T* dh, const T* gate, const T* up,
                                       int64_t n) {
  for (int64_t i = global_index(); i < n; i += global_stride()) {
    const float g = load(gate[i]), u = load(up[i]), d = load(dh[i]);
    const dm::SwigluGrads r = dm::swiglu_grads(g, u, d, dm::sigmoid(g));
    dgate[i] = store<T>(r.dgate);
    dup[i] = store<T>(r.dup);
  }
}

}  // namespace

template <class T>
void swiglu_forward(T* h, const T* gate, const T* up, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  MT_LAUNCH(swiglu_forward_kernel, grid_for(n), kThreads, 0, stream)(h, gate, up, n);
  check_launch("swiglu_forward");
}

template <class T>
void swiglu_backward(T* dgate, T* dup, const T* dh, const T* gate, const T* up, int64_t n,
                     cudaStream_t stream) {
  if (n <= 0) return;
  MT_LAUNCH(swiglu_backward_kernel, grid_for(n), kThreads, 0, stream)(dgate, dup, dh, gate, up, n);
  check_launch("swiglu_backward");
}

#define MT_INSTANTIATE(T)                                                                  \
  template void swiglu_forward<T>(T*, const T*, const T*, int64_t, cudaStream_t);          \
  template void swiglu_backward<T>(T*, T*, const T*, const T*, const T*, int64_t, cudaStream_t);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16_t)
#undef MT_INSTANTIATE

}  // namespace mt::cuda
