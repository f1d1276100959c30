// The AdamW update of one tensor (torch.optim.AdamW: decoupled weight decay, bias correction),
// fused with the gradient's clip scale and the refresh of its bf16 copy: one sweep over memory.
// Every element goes through the same vector code, so its result does not depend on the thread
// count or on where a tensor is cut (adamw.cpp).
#pragma once
#include <cstdint>

#include "core/bf16.h"
#include "kernels/device_math/adamw_element.h"  // AdamWScalars, the per-element update

namespace mt {

// w16 may be null (no bf16 copy).
void adamw_update(float* w, bf16* w16, const float* g, float* m, float* v, int64_t n,
                  const AdamWScalars& s);

}  // namespace mt
