// SwiGLU gate of the LLaMA MLP: h = silu(gate) * up, silu(a) = a * sigmoid(a).
#pragma once
#include <cstdint>

namespace mt {

// All arrays have n elements of T; math in f32.
template <class T>
void swiglu_forward(T* h, const T* gate, const T* up, int64_t n);
// dgate, dup are overwritten.
template <class T>
void swiglu_backward(T* dgate, T* dup, const T* dh, const T* gate, const T* up, int64_t n);

}  // namespace mt
