// The AdamW update of one element (torch.optim.AdamW: decoupled weight decay, bias correction),
// with the scalars a backend derives once per tensor. The CPU kernel (kernels/cpu/adamw.cpp) and
// the GPU kernel (kernels/cuda/adamw.cu) both call adamw_element, so the update is written once.
#pragma once
#include <cmath>

#include "kernels/device_math/host_device.h"

namespace mt {

struct AdamWScalars {
  float beta1, beta2, eps;
  float step_size;   // lr / (1 - beta1^t)
  float bc2_sqrt;    // sqrt(1 - beta2^t)
  float decay;       // 1 - lr * weight_decay, or 1 without decay
  float grad_scale;  // applied to every gradient first
};

namespace dm {

// Updates w, m, v of one element from its gradient g (before the grad_scale).
MT_HOST_DEVICE void adamw_element(float& w, float& m, float& v, float g, const AdamWScalars& s) {
  const float gi = g * s.grad_scale;
  m = s.beta1 * m + (1.0f - s.beta1) * gi;
  v = s.beta2 * v + (1.0f - s.beta2) * gi * gi;
  const float denom = sqrtf(v) / s.bc2_sqrt + s.eps;
  w = w * s.decay - s.step_size * m / denom;
}

}  // namespace dm
}  // namespace mt
