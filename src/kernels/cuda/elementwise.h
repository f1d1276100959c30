// The small elementwise ops (Backend::residual_add, add, scale, convert between f32 and bf16, fill).
#pragma once
#include <cstdint>

#include "kernels/cuda/gpu_runtime.h"

namespace mt::cuda {

// y = x + delta; y and x f32, delta float or bf16; y may be x. add(dst, src) is
// residual_add(dst, dst, src).
template <class T>
void residual_add(float* y, const float* x, const T* delta, int64_t n, cudaStream_t stream);

// x *= factor (f32).
void scale(float* x, float factor, int64_t n, cudaStream_t stream);

// dst = src, rounded to nearest even into bf16 (kernels/device_math/bf16_round.h).
void convert(__nv_bfloat16* dst, const float* src, int64_t n, cudaStream_t stream);
void convert(float* dst, const __nv_bfloat16* src, int64_t n, cudaStream_t stream);

// dst[i] = value, converted once to T (float, bf16 or int32_t, as Backend::fill).
template <class T>
void fill(T* dst, float value, int64_t n, cudaStream_t stream);

}  // namespace mt::cuda
