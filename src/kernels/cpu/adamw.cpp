#include "kernels/cpu/adamw.h"

#include <cmath>

namespace mt {

void adamw_update(float* __restrict w, bf16* __restrict w16, const float* __restrict g,
                  float* __restrict m, float* __restrict v, int64_t n, const AdamWScalars& s) {
  const float b1 = s.beta1, b2 = s.beta2;
#pragma omp parallel for schedule(static) if (n > (1 << 15))
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] * s.grad_scale;
    m[i] = b1 * m[i] + (1.0f - b1) * gi;
    v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
    const float denom = std::sqrt(v[i]) / s.bc2_sqrt + s.eps;
    w[i] = w[i] * s.decay - s.step_size * m[i] / denom;
  }
  if (w16) convert(w16, w, size_t(n));
}

}  // namespace mt
