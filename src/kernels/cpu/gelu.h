// GeLU in its tanh approximation, elementwise (GPT-2's MLP: c_fc -> gelu -> c_proj): the function
// of kernels/device_math/gelu_element.h, computed in the vectorised form of gelu_sigmoid.h.
#pragma once
#include <cstdint>

namespace mt {

// All arrays have n elements of T; math in f32. Outputs may alias inputs element for element.
template <class T>
void gelu_forward(T* h, const T* x, int64_t n);
// dx = dh * gelu'(x), overwritten.
template <class T>
void gelu_backward(T* dx, const T* dh, const T* x, int64_t n);

}  // namespace mt
