// RMSNorm over rows split by columns over devices (Backend::rmsnorm_row_dots and the summed
// forms; OLMoE's whole-projection q/k norm under tensor parallelism): x and w f32, y and dout of T
// (float or bf16), rstd and dots f32 [N]. One block per row for the row-local parts; the weight
// gradient is reduced in rmsnorm_backward's fixed order (chunks of kRmsnormRowsPerChunk rows in
// row order, then the chunks in order), no atomics.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/gpu_runtime.h"

namespace mt::cuda {

// dots[n] = sum over c of x * y * (w ? offset + w : 1), in double.
template <class T>
void rmsnorm_row_dots(float* dots, const float* x, const T* y, const float* w, int64_t N, int64_t C,
                      float offset, cudaStream_t stream);
// rstd: the row's sum of squares over `width` values on entry, 1 / sqrt(sum / width + eps) on exit.
template <class T>
void rmsnorm_forward_summed(T* out, float* rstd, const float* x, const float* w, int64_t N, int64_t C,
                            int64_t width, float eps, float offset, cudaStream_t stream);
// Scratch bytes rmsnorm_backward_summed needs (0 when there is no dw to reduce).
size_t rmsnorm_backward_summed_scratch_bytes(int64_t N, int64_t C, bool with_dw);
// dx += rstd * (dout w' - x rstd^2 dots / width) (w' = offset + w); dw += sum over rows of
// dout * x * rstd unless dw is null.
template <class T>
void rmsnorm_backward_summed(float* dx, float* dw, const T* dout, const float* x, const float* w,
                             const float* rstd, const float* dots, int64_t N, int64_t C, int64_t width,
                             float offset, void* scratch, size_t scratch_bytes, cudaStream_t stream);

}  // namespace mt::cuda
