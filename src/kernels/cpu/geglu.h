// GeGLU gate of Gemma's MLP: h = gelu_tanh(gate) * up (kernels/device_math/gelu_element.h; computed
// in the vectorised form of kernels/cpu/gelu_sigmoid.h).
#pragma once
#include <cstdint>

namespace mt {

// All arrays have n elements of T; math in f32. Outputs may alias inputs element for element.
template <class T>
void geglu_forward(T* h, const T* gate, const T* up, int64_t n);
// dgate, dup are overwritten.
template <class T>
void geglu_backward(T* dgate, T* dup, const T* dh, const T* gate, const T* up, int64_t n);

}  // namespace mt
