// Sum of squares of a float array in an order fixed by n alone, so a gradient norm is
// bit-identical whatever the thread count.
#pragma once
#include <cstdint>

namespace mt {

double sum_squares(const float* x, int64_t n);

}  // namespace mt
