#include "core/tensor_box.h"

#include <algorithm>

#include "core/error.h"

namespace mt {

namespace {
// As many ends as begins, and begin <= end in every dimension.
bool well_formed(const TensorBox& b) {
  if (b.end.size() != b.begin.size()) return false;
  for (size_t d = 0; d < b.rank(); ++d)
    if (b.begin[d] > b.end[d]) return false;
  return true;
}
}  // namespace

TensorBox TensorBox::whole(const std::vector<int64_t>& shape) {
  return TensorBox{std::vector<int64_t>(shape.size(), 0), shape};
}

std::vector<int64_t> TensorBox::shape() const {
  std::vector<int64_t> s(rank());
  for (size_t d = 0; d < rank(); ++d) s[d] = end[d] - begin[d];
  return s;
}

int64_t TensorBox::numel() const {
  int64_t n = 1;
  for (size_t d = 0; d < rank(); ++d) n *= end[d] - begin[d];
  return n;
}

bool TensorBox::contains(const TensorBox& inner) const {
  if (inner.begin.size() != rank() || inner.end.size() != rank() || end.size() != rank()) return false;
  for (size_t d = 0; d < rank(); ++d)
    if (inner.begin[d] < begin[d] || inner.begin[d] > inner.end[d] || inner.end[d] > end[d]) return false;
  return true;
}

std::string TensorBox::str() const {
  std::string s = "[";
  for (size_t d = 0; d < rank(); ++d)
    s += (d ? ", " : "") + std::to_string(begin[d]) + ":" + std::to_string(d < end.size() ? end[d] : 0);
  return s + "]";
}

TensorBox intersect(const TensorBox& a, const TensorBox& b) {
  if (a.rank() != b.rank()) fail("intersect: boxes " + a.str() + " and " + b.str() + " differ in rank");
  TensorBox out;
  for (size_t d = 0; d < a.rank(); ++d) {
    const int64_t lo = std::max(a.begin[d], b.begin[d]);
    out.begin.push_back(lo);
    out.end.push_back(std::max(lo, std::min(a.end[d], b.end[d])));
  }
  return out;
}

void check_region(const char* who, const TensorBox& src_box, const TensorBox& dst_box, const TensorBox& region) {
  // An empty region copies nothing, wherever it lies: intersect() of two boxes that do not meet
  // is such a region, and callers should not have to filter those out.
  if (well_formed(region) && region.empty() && region.rank() == src_box.rank() && region.rank() == dst_box.rank())
    return;
  if (!src_box.contains(region))
    fail(std::string(who) + ": region " + region.str() + " is not inside the source box " + src_box.str());
  if (!dst_box.contains(region))
    fail(std::string(who) + ": region " + region.str() + " is not inside the destination box " + dst_box.str());
}

template <class T>
void copy_box(const T* src, const TensorBox& src_box, T* dst, const TensorBox& dst_box, const TensorBox& region) {
  check_region("copy_box", src_box, dst_box, region);
  for_each_run(src_box, dst_box, region,
               [&](int64_t so, int64_t dof, int64_t n) { std::copy_n(src + so, n, dst + dof); });
}

template void copy_box<float>(const float*, const TensorBox&, float*, const TensorBox&, const TensorBox&);
template void copy_box<bf16>(const bf16*, const TensorBox&, bf16*, const TensorBox&, const TensorBox&);

}  // namespace mt
