// Reference bias add and its backward (column sums of dy), in double.
#pragma once
#include "core/tensor.h"

namespace mt::ref {

void bias_add(const Tensor& y, const Tensor& b);        // y [N, C] += b [C]
void bias_backward(const Tensor& db, const Tensor& dy);  // db [C] += sum over rows of dy [N, C]

}  // namespace mt::ref
