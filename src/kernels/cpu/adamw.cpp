#include "kernels/cpu/adamw.h"

namespace mt {

void adamw_update(float* __restrict w, bf16* __restrict w16, const float* __restrict g,
                  float* __restrict m, float* __restrict v, int64_t n, const AdamWScalars& s) {
#pragma omp parallel for schedule(static) if (n > (1 << 15))
  for (int64_t i = 0; i < n; ++i) dm::adamw_element(w[i], m[i], v[i], g[i], s);
  if (w16) convert(w16, w, size_t(n));
}

}  // namespace mt
