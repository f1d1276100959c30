// Reference matrix product: the textbook triple loop, summed in double.
#pragma once
#include "core/tensor.h"

namespace mt::ref {

// c = alpha * op(a) op(b) (+ c when accumulate); op(x) is x or x^T. Shapes already checked.
void matmul(const Tensor& c, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
            double alpha, bool accumulate);

}  // namespace mt::ref
