// A small kernel that uses what the vendor mapping must carry (kernels/cuda/gpu_runtime.h): bf16
// conversions, a warp-wide shuffle reduction over kWarpSize lanes, a stream launch. It is not part
// of the library: scripts/hip_compile_check.sh compiles it for gfx90a (and nvcc for sm_90) so the
// mapping is checked even where no kernel of the library is there yet.
#include "kernels/cuda/gpu_runtime.h"

namespace mt::cuda {

__global__ void row_sums_bf16(float* out, const __nv_bfloat16* x, int cols) {
  const __nv_bfloat16* row = x + static_cast<long long>(blockIdx.x) * cols;
  float sum = 0.0f;
  for (int c = threadIdx.x; c < cols; c += kWarpSize) sum += __bfloat162float(row[c]);
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) sum += __shfl_xor_sync(~0u, sum, offset);
  if (threadIdx.x == 0) out[blockIdx.x] = sum;
}

__global__ void to_bf16(__nv_bfloat16* out, const float* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2bfloat16(x[i]);
}

// One warp per row.
cudaError_t launch_row_sums_bf16(float* out, const __nv_bfloat16* x, int rows, int cols, cudaStream_t stream) {
  MT_LAUNCH(row_sums_bf16, rows, kWarpSize, 0, stream)(out, x, cols);
  return cudaGetLastError();
}

cudaError_t launch_to_bf16(__nv_bfloat16* out, const float* x, int n, cudaStream_t stream) {
  MT_LAUNCH(to_bf16, (n + 255) / 256, 256, 0, stream)(out, x, n);
  return cudaGetLastError();
}

}  // namespace mt::cuda
