// Sums and maxima by warp shuffles: over a warp (an xor butterfly, every lane gets the result),
// and over a thread block as the warps' results combined in warp order. A fixed order, so a
// reduction gives the same bits on every run; cheaper than a shared-memory tree
// (block_reduce.h) where a row is reduced once per element pass, as in attention's softmax.
// Block versions: blockDim.x a multiple of kWarpSize and at most kWarpSize warps; every thread of
// the block calls them and gets the result; `partials` is kWarpSize floats of shared memory.
#pragma once
#include <cmath>

#include "kernels/cuda/gpu_runtime.h"

namespace mt::cuda {

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = kWarpSize / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = kWarpSize / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float block_sum(float v, float* partials) {
  v = warp_sum(v);
  const int lane = threadIdx.x % kWarpSize, warps = blockDim.x / kWarpSize;
  __syncthreads();  // an earlier reduction's readers are done with `partials`
  if (lane == 0) partials[threadIdx.x / kWarpSize] = v;
  __syncthreads();
  return warp_sum(lane < warps ? partials[lane] : 0.0f);
}

__device__ __forceinline__ float block_max(float v, float* partials) {
  v = warp_max(v);
  const int lane = threadIdx.x % kWarpSize, warps = blockDim.x / kWarpSize;
  __syncthreads();
  if (lane == 0) partials[threadIdx.x / kWarpSize] = v;
  __syncthreads();
  return warp_max(lane < warps ? partials[lane] : -INFINITY);
}

}  // namespace mt::cuda
