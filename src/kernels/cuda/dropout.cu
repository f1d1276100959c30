#include "kernels/cuda/dropout.h"

#include "kernels/cuda/launch.h"

namespace mt::cuda {

namespace {

template <class T>
__global__ void dropout_kernel(T* y, const T* x, int64_t rows, int64_t cols, DropoutMask mask,
                               uint32_t threshold, float scale, bool accumulate) {
  const int64_t n = rows * cols;
  for (int64_t i = global_index(); i < n; i += global_stride()) {
    const float kept = dm::dropout_keeps(mask, threshold, i / cols, i % cols) ? load(x[i]) * scale : 0.0f;
    y[i] = store<T>(accumulate ? load(y[i]) + kept : kept);
  }
}

}  // namespace

template <class T>
void dropout(T* y, const T* x, int64_t rows, int64_t cols, const DropoutMask& mask, bool accumulate,
             cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n <= 0) return;
  MT_LAUNCH(dropout_kernel, grid_for(n), kThreads, 0, stream)(y, x, rows, cols, mask, dm::dropout_threshold(mask.p),
                                                       dm::dropout_scale(mask.p), accumulate);
  check_launch("dropout");
}

template void dropout<float>(float*, const float*, int64_t, int64_t, const DropoutMask&, bool, cudaStream_t);
template void dropout<bf16_t>(bf16_t*, const bf16_t*, int64_t, int64_t, const DropoutMask&, bool, cudaStream_t);

}  // namespace mt::cuda
