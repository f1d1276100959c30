// Reference RMSNorm over rows split by columns over devices (Backend::rmsnorm_row_dots and the
// summed forms), in double: the partial row sums one device contributes, and the norm finished
// from the sums over every device's columns.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace mt::ref {

// dots f32 [N] = per row, sum of x * y * (weight_offset + w) (w empty: x * y); x f32, y float.
void rmsnorm_row_dots(const Tensor& dots, const Tensor& x, const Tensor& y, const Tensor& w, double weight_offset);
// rstd: each row's sum of squares over `width` values on entry, 1 / sqrt(sum / width + eps) on exit.
void rmsnorm_forward_summed(const Tensor& out, const Tensor& rstd, const Tensor& x, const Tensor& w, int64_t width,
                            double eps, double weight_offset);
// dx += r (w' g - x r^2 dots / width) (w' = offset + w); dw += sum over rows of g x r unless empty.
void rmsnorm_backward_summed(const Tensor& dx, const Tensor& dw, const Tensor& dout, const Tensor& x,
                             const Tensor& w, const Tensor& rstd, const Tensor& dots, int64_t width,
                             double weight_offset);

}  // namespace mt::ref
