#include "kernels/cuda/gelu.h"

#include "kernels/cuda/launch.h"
#include "kernels/device_math/gelu_element.h"

namespace mt::cuda {

namespace {

template <class T>
__global__ void gelu_forward_kernel(T* h, const T* x, int64_t n) {
  for (int64_t i = global_index(); i < n; i += global_stride()) h[i] = store<T>(dm::gelu_tanh(load(x[i])));
}

template <class T>
__global__ void gelu_backward_kernel(T* dx, const T* dh, const T* x, int64_t n) {
  for (int64_t i = global_index(); i < n; i += global_stride())
    dx[i] = store<T>(load(dh[i]) * dm::gelu_tanh_derivative(load(x[i])));
}

}  // namespace

template <class T>
void gelu_forward(T* h, const T* x, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  MT_LAUNCH(gelu_forward_kernel, grid_for(n), kThreads, 0, stream)(h, x, n);
  check_launch("gelu_forward");
}

template <class T>
void gelu_backward(T* dx, const T* dh, const T* x, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  MT_LAUNCH(gelu_backward_kernel, grid_for(n), kThreads, 0, stream)(dx, dh, x, n);
  check_launch("gelu_backward");
}

#define MT_INSTANTIATE(T)                                                     \
  template void gelu_forward<T>(T*, const T*, int64_t, cudaStream_t);         \
  template void gelu_backward<T>(T*, const T*, const T*, int64_t, cudaStream_t);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16_t)
#undef MT_INSTANTIATE

}  // namespace mt::cuda
