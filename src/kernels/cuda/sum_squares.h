// Sum of squares of an f32 array in double, in an order fixed by n alone (Backend::sum_squares):
// kSumSquaresPartials equal chunks, each summed by one block (per-thread strided sums, then a
// shared-memory tree), then one block adds the partials in a fixed tree. No atomics: the result is
// bit-identical on every run and every GPU.
#pragma once
#include <cstdint>

#include "kernels/cuda/gpu_runtime.h"

namespace mt::cuda {

inline constexpr int kSumSquaresPartials = 1024;

// *result (device memory) = sum of x[i]^2. partials: device scratch of kSumSquaresPartials doubles.
void sum_squares(double* result, const float* x, int64_t n, double* partials, cudaStream_t stream);

}  // namespace mt::cuda
