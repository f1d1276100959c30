// One element of the SwiGLU gate, h = silu(g) * u with silu(g) = g * sigmoid(g), and its
// gradients. The sigmoid is an argument: the CPU kernel computes it with its vectorisable
// fast_exp, the GPU with expf (sigmoid() below), and everything after it is this one arithmetic.
#pragma once
#include <cmath>

#include "kernels/device_math/host_device.h"

namespace mt::dm {

MT_HOST_DEVICE float sigmoid(float a) { return 1.0f / (1.0f + expf(-a)); }

// s = sigmoid(g)
MT_HOST_DEVICE float swiglu_value(float g, float u, float s) { return g * s * u; }

// d silu(g)/dg = s + g s (1 - s); dgate = d u silu'(g), dup = d silu(g).
struct SwigluGrads {
  float dgate, dup;
};
MT_HOST_DEVICE SwigluGrads swiglu_grads(float g, float u, float d, float s) {
  const float silu = g * s;
  return {d * u * (s + silu * (1.0f - s)), d * silu};
}

}  // namespace mt::dm
