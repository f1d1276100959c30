#include "kernels/cuda/copy_box.h"

#include "kernels/cuda/launch.h"
#include "kernels/device_math/box_offsets.h"

namespace mt::cuda {

namespace {

template <class T>
__global__ void copy_box_kernel(const T* src, T* dst, dm::BoxPlan p) {
  for (int64_t e = global_index(); e < p.numel; e += global_stride()) {
    const dm::BoxOffsets o = dm::box_offsets(p, e);
    dst[o.dst] = src[o.src];
  }
}

}  // namespace

template <class T>
void copy_box(const T* src, const TensorBox& src_box, T* dst, const TensorBox& dst_box,
              const TensorBox& region, cudaStream_t stream) {
  const dm::BoxPlan p = dm::box_plan(src_box, dst_box, region);
  if (p.numel == 0) return;
  MT_LAUNCH(copy_box_kernel, grid_for(p.numel), kThreads, 0, stream)(src, dst, p);
  check_launch("copy_box");
}

template void copy_box<float>(const float*, const TensorBox&, float*, const TensorBox&,
                              const TensorBox&, cudaStream_t);
template void copy_box<bf16_t>(const bf16_t*, const TensorBox&, bf16_t*, const TensorBox&,
                               const TensorBox&, cudaStream_t);

}  // namespace mt::cuda
