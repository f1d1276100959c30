// Inverted dropout by a hashed mask (kernels/device_math/dropout_mask.h), for LoRA dropout.
#pragma once
#include <cstdint>

#include "kernels/device_math/dropout_mask.h"

namespace mt {

// y[r, c] (+)= keep(r, c) ? x[r, c] / (1 - p) : 0 over a [rows, cols] row-major tensor, in float
// (rounded once into T).
template <class T>
void dropout(T* y, const T* x, int64_t rows, int64_t cols, const DropoutMask& mask, bool accumulate);

}  // namespace mt
