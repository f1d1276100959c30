// RMSNorm forward and backward (Backend::rmsnorm_forward / rmsnorm_backward): x and w f32, out and
// dout of T (float or bf16), rstd f32 [N]. One block per row for the row-local parts; the weight
// gradient, a sum over rows, is reduced in a fixed order (chunks of kRmsnormRowsPerChunk rows in
// row order, then the chunks in order) with no atomics, so it is the same on every run.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/gpu_runtime.h"

namespace mt::cuda {

inline constexpr int64_t kRmsnormRowsPerChunk = 64;

template <class T>
void rmsnorm_forward(T* out, float* rstd, const float* x, const float* w, int64_t N, int64_t C,
                     float eps, float offset, cudaStream_t stream);

// Scratch bytes rmsnorm_backward needs (0 when there is no dw to reduce).
size_t rmsnorm_backward_scratch_bytes(int64_t N, int64_t C, bool with_dw);
// dx += the input gradient; dw += the weight gradient unless dw is null (a frozen weight).
template <class T>
void rmsnorm_backward(float* dx, float* dw, const T* dout, const float* x, const float* w,
                      const float* rstd, int64_t N, int64_t C, float offset, void* scratch,
                      size_t scratch_bytes, cudaStream_t stream);
// The fused forms (Backend::residual_rmsnorm_forward / rmsnorm_backward_convert), with the same
// per-thread arithmetic as residual_add + rmsnorm_forward and rmsnorm_backward + convert, so the
// same bits. y may be x; dx_c may be dout (dw is summed first, in stream order). Scratch as
// rmsnorm_backward's.
template <class T>
void residual_rmsnorm_forward(float* y, T* out, float* rstd, const float* x, const T* delta, const float* w,
                              int64_t N, int64_t C, float eps, float offset, cudaStream_t stream);
template <class T>
void rmsnorm_backward_convert(float* dx, T* dx_c, float* dw, const T* dout, const float* x, const float* w,
                              const float* rstd, int64_t N, int64_t C, float offset, void* scratch,
                              size_t scratch_bytes, cudaStream_t stream);
// dw += sum over rows of dout * x * rstd in rmsnorm_backward's fixed order, for the backwards that
// end in that weight gradient (rmsnorm_backward, rmsnorm_split.h's): scratch of
// rmsnorm_backward_scratch_bytes(N, C, true); `op` names the caller in the errors.
template <class T>
void rmsnorm_weight_grad(float* dw, const T* dout, const float* x, const float* rstd, int64_t N, int64_t C,
                         void* scratch, size_t scratch_bytes, const char* op, cudaStream_t stream);

}  // namespace mt::cuda
