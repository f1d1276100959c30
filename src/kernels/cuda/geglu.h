// GeGLU, h = gelu_tanh(gate) * up elementwise (Backend::geglu_forward / geglu_backward), float or
// bf16, math in f32 (kernels/device_math/gelu_element.h). Outputs may alias inputs.
#pragma once
#include <cstdint>

#include "kernels/cuda/gpu_runtime.h"

namespace mt::cuda {

template <class T>
void geglu_forward(T* h, const T* gate, const T* up, int64_t n, cudaStream_t stream);
// dgate and dup overwritten.
template <class T>
void geglu_backward(T* dgate, T* dup, const T* dh, const T* gate, const T* up, int64_t n,
                    cudaStream_t stream);

}  // namespace mt::cuda
