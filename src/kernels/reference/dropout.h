// Textbook inverted dropout: the mask of kernels/device_math/dropout_mask.h, the math in double.
#pragma once
#include "core/tensor.h"
#include "kernels/device_math/dropout_mask.h"

namespace mt::ref {

// y (+)= keep ? x / (1 - p) : 0, element by element.
void dropout(const Tensor& y, const Tensor& x, const DropoutMask& mask, bool accumulate);

}  // namespace mt::ref
