// Reference rotary embedding, HF "rotate_half" pairing: in each head of D values, element i and
// element i + D/2 form a pair rotated by the angle pos * inv_freq[i], whose cosine and sine are
// read from the tables cos/sin [max_pos, D/2] (core/rope_frequencies.h).
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace mt::ref {

// In place on x [N, heads * D], positions i32 [N]; a position outside the tables is an mt::Error.
void rope_forward(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& positions,
                  int64_t heads);
// The transpose of the rotation (rotation by minus the angle): the gradient of the forward.
void rope_backward(const Tensor& dx, const Tensor& cos, const Tensor& sin,
                   const Tensor& positions, int64_t heads);

}  // namespace mt::ref
