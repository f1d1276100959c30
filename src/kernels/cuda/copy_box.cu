#include "kernels/cuda/copy_box.h"

#include <string>

#include "kernels/cuda/launch.h"

namespace mt::cuda {

namespace {

// The region as the kernel sees it: its shape, and per dimension the element strides of the two
// buffers, with the offsets of the region's first element in each.
struct BoxCopy {
  int rank;
  int64_t shape[kCopyBoxMaxRank], src_stride[kCopyBoxMaxRank], dst_stride[kCopyBoxMaxRank];
  int64_t src_first, dst_first, numel;
};

template <class T>
__global__ void copy_box_kernel(const T* src, T* dst, BoxCopy b) {
  for (int64_t e = global_index(); e < b.numel; e += global_stride()) {
    int64_t rest = e, so = b.src_first, dof = b.dst_first;
    for (int d = b.rank - 1; d >= 0; --d) {  // row-major: the last dimension fastest
      const int64_t i = rest % b.shape[d];
      rest /= b.shape[d];
      so += i * b.src_stride[d];
      dof += i * b.dst_stride[d];
    }
    dst[dof] = src[so];
  }
}

}  // namespace

template <class T>
void copy_box(const T* src, const TensorBox& src_box, T* dst, const TensorBox& dst_box,
              const TensorBox& region, cudaStream_t stream) {
  check_region("copy_box", src_box, dst_box, region);
  if (region.empty()) return;
  const size_t rank = region.rank();
  if (rank > kCopyBoxMaxRank)
    throw Error("copy_box: a box of rank " + std::to_string(rank) + ", expected at most " +
                std::to_string(kCopyBoxMaxRank) + " dimensions on the GPU");
  BoxCopy b{};
  b.rank = int(rank);
  b.numel = region.numel();
  const std::vector<int64_t> ss = src_box.shape(), ds = dst_box.shape(), rs = region.shape();
  int64_t s_stride = 1, d_stride = 1;
  for (size_t k = rank; k-- > 0;) {
    b.shape[k] = rs[k];
    b.src_stride[k] = s_stride, b.dst_stride[k] = d_stride;
    b.src_first += (region.begin[k] - src_box.begin[k]) * s_stride;
    b.dst_first += (region.begin[k] - dst_box.begin[k]) * d_stride;
    s_stride *= ss[k], d_stride *= ds[k];
  }
  copy_box_kernel<<<grid_for(b.numel), kThreads, 0, stream>>>(src, dst, b);
  check_launch("copy_box");
}

template void copy_box<float>(const float*, const TensorBox&, float*, const TensorBox&,
                              const TensorBox&, cudaStream_t);
template void copy_box<bf16_t>(const bf16_t*, const TensorBox&, bf16_t*, const TensorBox&,
                               const TensorBox&, cudaStream_t);

}  // namespace mt::cuda
