// sum over v of exp(x[v] - m) for one row of logits, the softmax denominator both cross-entropy
// kernels need: float partial sums over blocks of 4096 (16 simd lanes each), blocks added in
// double, so no float accumulator sees more than a few hundred terms. The order is fixed, so the
// result is the same for any thread count.
#pragma once
#include <algorithm>
#include <cstdint>

#include "core/bf16.h"
#include "kernels/cpu/fast_exp.h"

namespace mt {

template <class T>
inline double row_sum_exp(const T* x, int64_t V, float m) {
  constexpr int64_t kBlock = 4096;
  double sum = 0.0;
  for (int64_t b = 0; b < V; b += kBlock) {
    const int64_t e = std::min(V, b + kBlock);
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t v = b; v < e; ++v) s += fast_exp(to_float(x[v]) - m);
    sum += double(s);
  }
  return sum;
}

}  // namespace mt
