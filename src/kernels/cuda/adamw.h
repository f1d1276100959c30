// The AdamW update of one tensor (Backend::adamw_update), elementwise through
// kernels/device_math/adamw_element.h, fused with the refresh of the bf16 copy.
#pragma once
#include <cstdint>

#include "kernels/cuda/gpu_runtime.h"
#include "kernels/device_math/adamw_element.h"

namespace mt::cuda {

// w, g, m, v f32 [n]; w16 bf16 [n] or null.
void adamw_update(float* w, __nv_bfloat16* w16, const float* g, float* m, float* v, int64_t n,
                  const AdamWScalars& s, cudaStream_t stream);

}  // namespace mt::cuda
