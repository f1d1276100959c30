// Rotary position embedding in the HF layout ("rotate_half"): within each head of size D,
// element i is paired with element i + D/2 and the pair is rotated by angle pos * inv_freq[i].
// (Meta's original checkpoints pair (2i, 2i+1); converters permute q/k rows into this layout.)
#pragma once
#include <cstdint>

namespace mt {

struct RopeScaling {  // Llama 3.1 "llama3" frequency scaling; factor 0 means none
  float factor = 0.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int64_t original_max_position_embeddings = 8192;
};

// inv_freq: [D/2], the per-pair frequencies, with llama3 scaling applied when factor > 0.
void rope_inv_freq(float* inv_freq, int64_t D, float theta, const RopeScaling& scaling);
// cos/sin tables: [max_pos, D/2]
void rope_tables(float* cos, float* sin, int64_t max_pos, int64_t D, float theta,
                 const RopeScaling& scaling);

// In place on x: [N, H, D] (N tokens, H heads); pos: [N] positions (< max_pos of the tables).
template <class T>
void rope_forward(T* x, const float* cos, const float* sin, const int32_t* pos, int64_t N,
                  int64_t H, int64_t D);
// In place on dx: the transpose of the rotation (rotation by -angle).
template <class T>
void rope_backward(T* dx, const float* cos, const float* sin, const int32_t* pos, int64_t N,
                   int64_t H, int64_t D);

}  // namespace mt
