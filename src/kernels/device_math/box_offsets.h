// Where element e of a region (core/tensor_box.h, row-major) lies in the buffer holding src_box
// and in the one holding dst_box: the index math of the GPU copy_box, one element per thread.
// The plan is built on the host from the boxes; tests/test_device_math.cpp copies random regions
// with it and compares with core's copy_box.
#pragma once
#include <cstdint>
#include <string>

#include "core/error.h"
#include "core/tensor_box.h"
#include "kernels/device_math/host_device.h"

namespace mt::dm {

inline constexpr int kBoxMaxRank = 8;

// The region's shape, the two buffers' element strides per dimension, and the offsets of the
// region's first element in each.
struct BoxPlan {
  int rank = 0;
  int64_t shape[kBoxMaxRank] = {}, src_stride[kBoxMaxRank] = {}, dst_stride[kBoxMaxRank] = {};
  int64_t src_first = 0, dst_first = 0, numel = 0;
};

// mt::Error as core's check_region, or for a rank above kBoxMaxRank.
inline BoxPlan box_plan(const TensorBox& src_box, const TensorBox& dst_box, const TensorBox& region) {
  check_region("copy_box", src_box, dst_box, region);
  const int rank = int(region.rank());
  if (rank > kBoxMaxRank)
    fail("copy_box: a box of rank " + std::to_string(rank) + ", expected at most " +
         std::to_string(kBoxMaxRank) + " dimensions on the GPU");
  BoxPlan p;
  p.rank = rank;
  p.numel = region.empty() ? 0 : region.numel();
  const std::vector<int64_t> ss = src_box.shape(), ds = dst_box.shape(), rs = region.shape();
  int64_t s_stride = 1, d_stride = 1;
  for (int k = rank - 1; k >= 0; --k) {
    const size_t d = size_t(k);
    p.shape[k] = rs[d];
    p.src_stride[k] = s_stride, p.dst_stride[k] = d_stride;
    p.src_first += (region.begin[d] - src_box.begin[d]) * s_stride;
    p.dst_first += (region.begin[d] - dst_box.begin[d]) * d_stride;
    s_stride *= ss[d], d_stride *= ds[d];
  }
  return p;
}

struct BoxOffsets {
  int64_t src, dst;
};

// Element e (0 <= e < p.numel) of the region, in row-major order.
MT_HOST_DEVICE BoxOffsets box_offsets(const BoxPlan& p, int64_t e) {
  BoxOffsets o{p.src_first, p.dst_first};
  for (int d = p.rank - 1; d >= 0; --d) {  // the last dimension fastest
    const int64_t i = e % p.shape[d];
    e /= p.shape[d];
    o.src += i * p.src_stride[d];
    o.dst += i * p.dst_stride[d];
  }
  return o;
}

}  // namespace mt::dm
