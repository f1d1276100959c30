// What every kernel file shares: launch-error checks that throw mt::Error naming the kernel,
// grid sizes for grid-stride loops (indices are int64_t, so tensors past 2^31 elements and grids
// past 65535 rows are fine), and the typed element loads/stores of f32 and bf16 through the one
// rounding of kernels/device_math/bf16_round.h.
#pragma once
#include <cstdint>
#include <string>

#include "core/error.h"
#include "kernels/cuda/gpu_runtime.h"
#include "kernels/device_math/bf16_round.h"

namespace mt::cuda {

using bf16_t = __nv_bfloat16;

// Throws mt::Error "<what>: <the runtime's message>" unless err is cudaSuccess.
inline void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw Error(std::string(what) + ": " + cudaGetErrorString(err));
}
// After a launch: a bad configuration is reported here (errors while running surface later, at
// the stream's next synchronisation).
inline void check_launch(const char* kernel) { check(cudaGetLastError(), kernel); }

inline constexpr int kThreads = 256;  // default block size, a multiple of kWarpSize
static_assert(kThreads % kWarpSize == 0);

// Blocks for a grid-stride loop over n items, kThreads each; at least 1, at most a bound that
// keeps every SM busy without launching millions of blocks.
inline unsigned grid_for(int64_t n, int64_t per_block = kThreads) {
  const int64_t kMaxBlocks = 65535LL * 8;
  int64_t blocks = (n + per_block - 1) / per_block;
  if (blocks < 1) blocks = 1;
  return unsigned(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

// Threads for a block that reduces over a row of n elements with block_reduce (a power of two:
// its tree needs one) or warp_reduce's block sums (a multiple of the warp): the row's width rounded
// up, at least one warp, at most kThreads. A short row then does not leave most of a block idle
// through every step of its reductions.
inline unsigned row_threads_pow2(int64_t n) {
  unsigned t = kWarpSize;
  while (int64_t(t) < n && t < unsigned(kThreads)) t *= 2;
  return t;
}
inline unsigned row_threads_warps(int64_t n) {
  const int64_t t = (n + kWarpSize - 1) / kWarpSize * kWarpSize;
  return unsigned(t < kWarpSize ? kWarpSize : (t > kThreads ? kThreads : t));
}

#if MT_GPU_CODE
// The first index and the stride of a grid-stride loop, in int64_t.
__device__ __forceinline__ int64_t global_index() {
  return int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t global_stride() { return int64_t(gridDim.x) * blockDim.x; }

__device__ __forceinline__ float load(float x) { return x; }
__device__ __forceinline__ float load(bf16_t x) {
  return dm::bf16_bits_to_f32(__nv_bfloat16_raw(x).x);
}
template <class T> __device__ __forceinline__ T store(float x);
template <> __device__ __forceinline__ float store<float>(float x) { return x; }
template <> __device__ __forceinline__ bf16_t store<bf16_t>(float x) {
  __nv_bfloat16_raw r;
  r.x = dm::f32_to_bf16_bits(x);
  return bf16_t(r);
}
#endif

}  // namespace mt::cuda
