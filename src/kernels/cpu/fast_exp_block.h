// fast_exp (fast_exp.h) over a buffer, eight lanes at a time. g++ leaves a loop that calls
// fast_exp scalar on AVX2 (and below): its clamps become branches ("control flow in loop") that
// if-conversion may not undo under -ftrapping-math, so SwiGLU, GeLU and cross-entropy's gradient
// ran one exp per instruction on this project's AVX2 machine. Here the same arithmetic is written
// on GCC vector types (any x86-64 level: without AVX g++ splits each into two SSE halves), with
// selects as bit masks, so nothing can branch. Every operation is the scalar one's, in the same
// order, so a lane gives the scalar fast_exp's bits (tests/test_fast_exp_block.cpp checks it);
// the tail (n mod 8) uses the scalar function, and where a buffer is cut does not matter.
#pragma once
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/fast_exp.h"

namespace mt {

// Without AVX g++ warns that a 32-byte vector argument changes the ABI; these functions are all
// inline, so no call crosses that boundary.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
namespace fast_exp_detail {
typedef float F8 __attribute__((vector_size(32)));
typedef int32_t I8 __attribute__((vector_size(32)));

inline F8 select(I8 mask, F8 a, F8 b) {  // mask lanes are all ones or all zeros
  return std::bit_cast<F8>((mask & std::bit_cast<I8>(a)) | (~mask & std::bit_cast<I8>(b)));
}

inline F8 broadcast(float v) { return F8{} + v; }

// fast_exp of eight lanes: fast_exp.h line by line (std::max(x, lo) is x < lo ? lo : x).
inline F8 fast_exp8(F8 x) {
  const F8 lo = broadcast(-87.0f), hi = broadcast(88.0f), shift = broadcast(12582912.0f);
  F8 xc = select(x < lo, lo, x);
  xc = select(hi < xc, hi, xc);
  const F8 t = xc * 1.44269504088896341f + shift;
  const F8 n = t - shift;
  const F8 r = (xc - n * 0.693145751953125f) - n * 1.42860682030941723212e-6f;
  F8 p = broadcast(1.0f / 5040.0f);
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const I8 ni = __builtin_convertvector(n, I8);
  const F8 scale = std::bit_cast<F8>((ni + 127) << 23);
  return select(x < lo, F8{}, p * scale);
}
}  // namespace fast_exp_detail

// x[i] = fast_exp(x[i]) for i < n, in place.
inline void fast_exp_inplace(float* x, int64_t n) {
  using fast_exp_detail::F8;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    F8 v;
    std::memcpy(&v, x + i, sizeof v);
    v = fast_exp_detail::fast_exp8(v);
    std::memcpy(x + i, &v, sizeof v);
  }
  for (; i < n; ++i) x[i] = fast_exp(x[i]);
}
#pragma GCC diagnostic pop

// The elementwise kernels that take their exps a block at a time (SwiGLU, GeLU, GeGLU): elements
// in blocks of kExpBlock, whose exps stay in L1 (1 KiB) between a kernel's passes, and threads
// taking whole blocks, so an element's arithmetic never depends on the thread count; below
// kExpBlockParallelMin elements a thread team costs more than it saves. f(i0, len) does one block,
// elements [i0, i0 + len), len <= kExpBlock.
constexpr int64_t kExpBlock = 256;
constexpr int64_t kExpBlockParallelMin = 1 << 15;
template <class F>
void for_each_exp_block(int64_t n, F&& f) {
  const int64_t blocks = (n + kExpBlock - 1) / kExpBlock;
#pragma omp parallel for schedule(static) if (n > kExpBlockParallelMin)
  for (int64_t b = 0; b < blocks; ++b) f(b * kExpBlock, std::min(kExpBlock, n - b * kExpBlock));
}

}  // namespace mt
