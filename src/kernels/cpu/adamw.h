// The AdamW update of one tensor (torch.optim.AdamW: decoupled weight decay, bias correction),
// fused with the gradient's clip scale and the refresh of its bf16 copy: one sweep over memory.
#pragma once
#include <cstdint>

#include "core/bf16.h"

namespace mt {

struct AdamWScalars {
  float beta1, beta2, eps;
  float step_size;   // lr / (1 - beta1^t)
  float bc2_sqrt;    // sqrt(1 - beta2^t)
  float decay;       // 1 - lr * weight_decay, or 1 without decay
  float grad_scale;  // applied to every gradient first
};

// w16 may be null (no bf16 copy).
void adamw_update(float* w, bf16* w16, const float* g, float* m, float* v, int64_t n,
                  const AdamWScalars& s);

}  // namespace mt
