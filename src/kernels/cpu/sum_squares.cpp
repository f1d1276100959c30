#include "kernels/cpu/sum_squares.h"

#include <algorithm>
#include <cstring>

namespace mt {

namespace {

// 16 partial sums in double, as two vectors of 8 (one zmm each with AVX-512; the compiler splits
// them into narrower registers elsewhere). Separate partial sums are what let the loop run in
// vector registers: one running sum is a chain of dependent adds that the compiler may not
// reorder (no -ffast-math), a scalar add per element. Each product is formed and added in double
// (exact square of a float, one rounding per add), so the sum is as accurate as a double loop.
typedef double SumF64x8 __attribute__((vector_size(64)));
typedef float SumF32x8 __attribute__((vector_size(32)));
constexpr int64_t kSumLanes = 16;

double sum_squares_chunk(const float* x, int64_t n) {
  SumF64x8 a = {}, b = {};
  int64_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes) {
    SumF32x8 lo, hi;
    std::memcpy(&lo, x + i, sizeof lo);
    std::memcpy(&hi, x + i + 8, sizeof hi);
    const SumF64x8 dlo = __builtin_convertvector(lo, SumF64x8);
    const SumF64x8 dhi = __builtin_convertvector(hi, SumF64x8);
    a += dlo * dlo;
    b += dhi * dhi;
  }
  // The last n % 16 elements into the first lanes, then the 16 lanes in a fixed order: the order
  // depends on n alone.
  double lane[kSumLanes];
  std::memcpy(lane, &a, sizeof a);
  std::memcpy(lane + 8, &b, sizeof b);
  for (int64_t j = 0; i < n; ++i, ++j) lane[j] += double(x[i]) * double(x[i]);
  double s = 0.0;
  for (double l : lane) s += l;
  return s;
}

}  // namespace

double sum_squares(const float* x, int64_t n) {
  // Fixed chunks, whose bounds depend on n alone, so the summation order never depends on the
  // thread count: the sum is bit-identical whatever OMP_NUM_THREADS is.
  constexpr int64_t kChunks = 64;
  double partial[kChunks] = {};
  const int64_t per = (n + kChunks - 1) / kChunks;
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t c = 0; c < kChunks; ++c) {
    const int64_t begin = std::min(n, c * per), end = std::min(n, begin + per);
    partial[c] = sum_squares_chunk(x + begin, end - begin);
  }
  double sum = 0.0;
  for (double s : partial) sum += s;
  return sum;
}

}  // namespace mt
