// Reference elementwise and layout ops: residual adds, dtype conversion, column blocks and boxes.
#pragma once
#include <span>

#include "core/tensor.h"
#include "core/tensor_box.h"

namespace mt::ref {

// y = x + delta (y, x f32; delta f32 or bf16; y may be x).
void residual_add(const Tensor& y, const Tensor& x, const Tensor& delta);
// x *= factor (x f32).
void scale(const Tensor& x, double factor);
// dst = src in dst's dtype (bf16 by round to nearest even); same dtype is a plain copy.
void convert(const Tensor& dst, const Tensor& src);
// src [N, sum of widths] -> blocks [N, width_i] (split), and the reverse (concat). Any dtype.
void split_columns(const Tensor& src, std::span<const Tensor> blocks);
void concat_columns(const Tensor& dst, std::span<const Tensor> blocks);
// The elements of `region` from src (holding src_box) to dst (holding dst_box), one at a time in
// row-major order of region; dst outside region untouched. mt::Error as core's check_region.
void copy_box(const Tensor& src, const TensorBox& src_box, const Tensor& dst,
              const TensorBox& dst_box, const TensorBox& region);

}  // namespace mt::ref
