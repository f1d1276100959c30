#include "core/bf16.h"

namespace mt {

// Both loops are memory-bound and g++ -O3 vectorises them. (The AVX512-BF16 conversion
// instruction measured no faster, and it would flush subnormals to zero where this rounds them.)
void convert(bf16* dst, const float* src, size_t n) {
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (size_t i = 0; i < n; ++i) dst[i] = float_to_bf16(src[i]);
}

void convert(float* dst, const bf16* src, size_t n) {
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (size_t i = 0; i < n; ++i) dst[i] = to_float(src[i]);
}

}  // namespace mt
