// How a model split over tensor-parallel ranks combines per-rank partial results. The model calls
// it at the fixed points of Megatron-style tensor parallelism (after the row-parallel o and down
// products, after the column-parallel input gradients, in the vocabulary-parallel embedding and
// cross-entropy); it never learns who implements it or over which ranks. Null: one device.
#pragma once
#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/bf16.h"
#include "core/profile.h"

namespace mt {

class PartialSums {
 public:
  virtual ~PartialSums() = default;
  virtual void sum(float* data, int64_t n) = 0;  // in place: the elementwise sum over the group
  virtual void max(float* data, int64_t n) = 0;  // in place: the elementwise maximum
};

// Sums partial results of compute type T over the group (nothing without a PartialSums). bf16
// partials are summed in f32, so the reduction adds no rounding beyond the final conversion.
template <class T>
void sum_partials(PartialSums* ps, T* data, int64_t n) {
  if (!ps) return;
  MT_PROFILE("tensor-parallel all-reduce");
  if constexpr (std::is_same_v<T, float>) {
    ps->sum(data, n);
  } else {
    thread_local std::vector<float> f32;
    f32.resize(size_t(n));
    convert(f32.data(), data, size_t(n));
    ps->sum(f32.data(), n);
    convert(data, f32.data(), size_t(n));
  }
}

}  // namespace mt
