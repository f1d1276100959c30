// sum over v of exp(x[v] - m) for one row of logits, the softmax denominator both cross-entropy
// kernels need, and the row's scaled exps, where both kernels' gradients start. Blocks of 4096: each block's exps go into an L1 buffer eight lanes at a time
// (fast_exp_block.h; a reduction loop calling fast_exp stayed scalar on AVX2, 70% of the
// kernel's time), are summed in 16 float lanes (element j into lane j mod 16), and the lanes are
// added in double, block after block, so no float accumulator sees more than 256 terms. The order
// is written out, not left to the vectoriser, so the result is the same for any thread count and
// any instruction set.
#pragma once
#include <algorithm>
#include <cstdint>

#include "core/bf16.h"
#include "kernels/cpu/fast_exp_block.h"

namespace mt {

template <class T>
inline double row_sum_exp(const T* x, int64_t V, float m) {
  constexpr int64_t kBlock = 4096, kLanes = 16;
  double sum = 0.0;
  for (int64_t b = 0; b < V; b += kBlock) {
    const int64_t len = std::min(kBlock, V - b);
    float e[kBlock];
#pragma omp simd
    for (int64_t j = 0; j < len; ++j) e[j] = to_float(x[b + j]) - m;
    fast_exp_inplace(e, len);
    float lane[kLanes] = {};
    int64_t j = 0;
    for (; j + kLanes <= len; j += kLanes)
      for (int64_t l = 0; l < kLanes; ++l) lane[l] += e[j + l];
    for (int64_t l = 0; j + l < len; ++l) lane[l] += e[j + l];
    for (int64_t l = 0; l < kLanes; ++l) sum += double(lane[l]);
  }
  return sum;
}

// d[v] = fast_exp(x[v] - m) * k for v < V (the softmax times k), stored as T. In chunks whose
// exps stay in L1, eight lanes at a time (a loop calling fast_exp stays scalar on AVX2). d[v]
// depends on x[v] only, and a chunk is read before it is written, so d may be x.
template <class T>
inline void scaled_exp_row(T* d, const T* x, int64_t V, float m, float k) {
  constexpr int64_t kChunk = 512;
  for (int64_t v0 = 0; v0 < V; v0 += kChunk) {
    const int64_t len = std::min(kChunk, V - v0);
    float e[kChunk];
#pragma omp simd
    for (int64_t j = 0; j < len; ++j) e[j] = to_float(x[v0 + j]) - m;
    fast_exp_inplace(e, len);
#pragma omp simd
    for (int64_t j = 0; j < len; ++j) d[v0 + j] = from_float<T>(e[j] * k);
  }
}

}  // namespace mt
