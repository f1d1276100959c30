// Rotary embedding in place, HF "rotate_half" pairing (Backend::rope_forward / rope_backward):
// x [N, H * D] of T, cos and sin f32 tables [max_pos, D/2], positions i32 [N]. A position outside
// [0, max_pos) leaves its row unchanged (a kernel cannot throw; the CPU backend does not check
// either, and the reference backend reports it).
#pragma once
#include <cstdint>

#include "kernels/cuda/gpu_runtime.h"

namespace mt::cuda {

template <class T>
void rope_forward(T* x, const float* cos, const float* sin, const int32_t* positions, int64_t N,
                  int64_t H, int64_t D, int64_t max_pos, cudaStream_t stream);
template <class T>
void rope_backward(T* dx, const float* cos, const float* sin, const int32_t* positions, int64_t N,
                   int64_t H, int64_t D, int64_t max_pos, cudaStream_t stream);

}  // namespace mt::cuda
