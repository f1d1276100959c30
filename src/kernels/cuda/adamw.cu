#include "kernels/cuda/adamw.h"

#include "kernels/cuda/launch.h"

namespace mt::cuda {

namespace {

__global__ void adamw_kernel(float* w, bf16_t* w16, const float* g, float* m, float* v, int64_t n,
                             AdamWScalars s) {
  for (int64_t i = global_index(); i < n; i += global_stride()) {
    float wi = w[i], mi = m[i], vi = v[i];
    dm::adamw_element(wi, mi, vi, g[i], s);
    w[i] = wi, m[i] = mi, v[i] = vi;
    if (w16) w16[i] = store<bf16_t>(wi);
  }
}

}  // namespace

void adamw_update(float* w, bf16_t* w16, const float* g, float* m, float* v, int64_t n,
                  const AdamWScalars& s, cudaStream_t stream) {
  if (n <= 0) return;
  MT_LAUNCH(adamw_kernel, grid_for(n), kThreads, 0, stream)(w, w16, g, m, v, n, s);
  check_launch("adamw_update");
}

}  // namespace mt::cuda
