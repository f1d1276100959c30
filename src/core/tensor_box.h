// A rectangular block ("box") of a row-major tensor, and copying between buffers that each hold
// one box of the same tensor. Sharded training keeps every parameter as one box per rank; moving
// data between two different splits (a checkpoint written under one mesh, read under another)
// reduces to intersecting boxes and copying the overlap, which is all this file does.
//
// Boxes carry their position in the full tensor, so a buffer "holding box B" means B.numel()
// elements laid out row-major over B.shape(); offsets below are always into such a buffer.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/bf16.h"

namespace mt {

// Per dimension the half-open range [begin, end) of a full tensor's indices.
struct TensorBox {
  std::vector<int64_t> begin, end;

  static TensorBox whole(const std::vector<int64_t>& shape);
  size_t rank() const { return begin.size(); }
  std::vector<int64_t> shape() const;  // end - begin per dim
  int64_t numel() const;               // product of shape(); 1 for rank 0
  bool empty() const { return numel() == 0; }
  // `inner` has the same rank, begin <= end in every dim, and lies within this box. An empty
  // box is contained only when its ranges are within this one's (so [9:9] is not in [0:8]).
  bool contains(const TensorBox& inner) const;
  bool operator==(const TensorBox&) const = default;
  std::string str() const;  // "[0:8, 16:32]"
};

// The overlap of two boxes of the same tensor (mt::Error if their ranks differ). When they do not
// meet the result is empty (end clamped to begin in the dims that do not overlap).
TensorBox intersect(const TensorBox& a, const TensorBox& b);

// mt::Error "<who>: ..." unless the three boxes have one rank and region lies within both
// src_box and dst_box. An empty region (well formed, right rank) passes wherever it lies: it
// copies nothing, and it is what intersect() returns for boxes that do not meet.
void check_region(const char* who, const TensorBox& src_box, const TensorBox& dst_box, const TensorBox& region);

// Walks `region` in row-major order as runs of elements contiguous in both buffers and calls
// fn(src_offset, dst_offset, n) for each, offsets in elements into the buffers holding src_box
// and dst_box. Trailing dimensions that region spans completely in both boxes are folded into
// one run, so copying whole rows between equal-width boxes is a single call. The callers decide
// what a run means: a typed copy (copy_box) or a dtype conversion from file bytes (box_read).
template <class F>
void for_each_run(const TensorBox& src_box, const TensorBox& dst_box, const TensorBox& region, F&& fn) {
  check_region("for_each_run", src_box, dst_box, region);
  const size_t r = region.rank();
  if (region.empty()) return;
  if (r == 0) return void(fn(int64_t(0), int64_t(0), int64_t(1)));
  const std::vector<int64_t> ss = src_box.shape(), ds = dst_box.shape(), rs = region.shape();
  std::vector<int64_t> sstride(r, 1), dstride(r, 1);
  for (size_t d = r - 1; d > 0; --d) {
    sstride[d - 1] = sstride[d] * ss[d];
    dstride[d - 1] = dstride[d] * ds[d];
  }
  // Dims k..r-1 form one run: dim k may be partial, every dim after it spans both boxes fully.
  auto full = [&](size_t d) {
    return region.begin[d] == src_box.begin[d] && region.end[d] == src_box.end[d] &&
           region.begin[d] == dst_box.begin[d] && region.end[d] == dst_box.end[d];
  };
  size_t k = r - 1;
  int64_t run = rs[k];
  while (k > 0 && full(k)) run *= rs[--k];
  std::vector<int64_t> idx(region.begin.begin(), region.begin.begin() + std::ptrdiff_t(k));
  // Dim k's share of the offsets is the same for every run (the dims after it start at 0).
  const int64_t s_tail = (region.begin[k] - src_box.begin[k]) * sstride[k];
  const int64_t d_tail = (region.begin[k] - dst_box.begin[k]) * dstride[k];
  for (;;) {
    int64_t so = s_tail, dof = d_tail;
    for (size_t d = 0; d < k; ++d) {
      so += (idx[d] - src_box.begin[d]) * sstride[d];
      dof += (idx[d] - dst_box.begin[d]) * dstride[d];
    }
    fn(so, dof, run);
    size_t d = k;  // odometer over dims 0..k-1, last fastest
    while (d > 0 && ++idx[d - 1] == region.end[d - 1]) {
      idx[d - 1] = region.begin[d - 1];
      --d;
    }
    if (d == 0) return;
  }
}

// Copies the elements of `region` (a box of the full tensor, inside both src_box and dst_box, or
// empty) from src (holding src_box) to dst (holding dst_box). Elements of dst outside region are
// left alone. mt::Error as check_region. Instantiated for float and bf16.
template <class T>
void copy_box(const T* src, const TensorBox& src_box, T* dst, const TensorBox& dst_box, const TensorBox& region);

extern template void copy_box<float>(const float*, const TensorBox&, float*, const TensorBox&, const TensorBox&);
extern template void copy_box<bf16>(const bf16*, const TensorBox&, bf16*, const TensorBox&, const TensorBox&);

}  // namespace mt
