// Reference kernels of a mixture of experts' row moves (Backend::gather_rows, combine_rows,
// combine_rows_backward): plain loops in double, the oracle the CPU and CUDA kernels are tested
// against. An index outside the rows it names (a dropped slot's -1) reads as nothing.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace mt::ref {

void gather_rows(const Tensor& dst, const Tensor& src, const Tensor& rows);
void combine_rows(const Tensor& out, const Tensor& src, const Tensor& slots, const Tensor& weights,
                  int64_t k, bool accumulate);
void combine_rows_backward(const Tensor& dsrc, const Tensor& dweights, const Tensor& dout,
                           const Tensor& src, const Tensor& slots, const Tensor& weights, int64_t k);

}  // namespace mt::ref
