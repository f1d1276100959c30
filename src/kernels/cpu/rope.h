// Rotary position embedding in the HF layout ("rotate_half"): within each head of size D,
// element i is paired with element i + D/2 and the pair is rotated by angle pos * inv_freq[i].
// (Meta's original checkpoints pair (2i, 2i+1); converters permute q/k rows into this layout.)
#pragma once
#include <cstdint>

#include "core/rope_frequencies.h"

namespace mt {

// In place on x: [N, H, D] (N tokens, H heads); pos: [N] positions (< max_pos of the tables).
template <class T>
void rope_forward(T* x, const float* cos, const float* sin, const int32_t* pos, int64_t N,
                  int64_t H, int64_t D);
// In place on dx: the transpose of the rotation (rotation by -angle).
template <class T>
void rope_backward(T* dx, const float* cos, const float* sin, const int32_t* pos, int64_t N,
                   int64_t H, int64_t D);

}  // namespace mt
