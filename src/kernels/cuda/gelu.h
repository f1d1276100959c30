// GeLU, tanh approximation, elementwise (Backend::gelu_forward / gelu_backward), float or bf16,
// math in f32 (kernels/device_math/gelu_element.h). Outputs may alias inputs.
#pragma once
#include <cstdint>

#include "kernels/cuda/gpu_runtime.h"

namespace mt::cuda {

template <class T>
void gelu_forward(T* h, const T* x, int64_t n, cudaStream_t stream);
// dx = dh * gelu'(x), overwritten.
template <class T>
void gelu_backward(T* dx, const T* dh, const T* x, int64_t n, cudaStream_t stream);

}  // namespace mt::cuda
