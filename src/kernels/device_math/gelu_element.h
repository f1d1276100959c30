// One element of GeLU in its tanh approximation (GPT-2's "gelu_new", Gemma's
// "gelu_pytorch_tanh"), and its derivative:
//   gelu(x) = x/2 (1 + tanh(k (x + 0.044715 x^3))),  k = sqrt(2/pi).
// The GPU kernels evaluate it as written (tanhf is a fast intrinsic there); the CPU kernels compute
// the same function in its sigmoid form, which vectorises (kernels/cpu/gelu_sigmoid.h, with these
// constants); the tests write the formula in double.
#pragma once
#include <cmath>

#include "kernels/device_math/host_device.h"

namespace mt::dm {

inline constexpr float kGeluTanhK = 0.7978845608028654f;  // sqrt(2 / pi)
inline constexpr float kGeluTanhC = 0.044715f;

MT_HOST_DEVICE float gelu_tanh(float x) {
  const float t = tanhf(kGeluTanhK * (x + kGeluTanhC * x * x * x));
  return 0.5f * x * (1.0f + t);
}

// d gelu / dx = (1 + t)/2 + x/2 (1 - t^2) k (1 + 3 c x^2)
MT_HOST_DEVICE float gelu_tanh_derivative(float x) {
  const float t = tanhf(kGeluTanhK * (x + kGeluTanhC * x * x * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kGeluTanhK * (1.0f + 3.0f * kGeluTanhC * x * x);
}

}  // namespace mt::dm
