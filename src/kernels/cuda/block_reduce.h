// Reductions across one thread block in a fixed tree (no atomics): each thread's value goes into
// shared memory, then halves are combined pairwise, so the result depends only on the values and
// the block size, never on scheduling. blockDim.x must be a power of two (kThreads is); every
// thread of the block must call, and all get the result.
#pragma once
#if MT_GPU_CODE

#include "kernels/cuda/gpu_runtime.h"

namespace mt::cuda {

// scratch: shared memory of blockDim.x elements.
template <class T, class Op>
__device__ T block_reduce(T value, T* scratch, Op op) {
  const unsigned t = threadIdx.x;
  scratch[t] = value;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (t < half) scratch[t] = op(scratch[t], scratch[t + half]);
    __syncthreads();
  }
  const T result = scratch[0];
  __syncthreads();  // scratch may be reused right after
  return result;
}

struct Sum {
  template <class T> __device__ T operator()(T a, T b) const { return a + b; }
};
// std::max(a, b)'s rule (a unless a < b), as the CPU kernels take maxima.
struct Max {
  template <class T> __device__ T operator()(T a, T b) const { return a < b ? b : a; }
};

}  // namespace mt::cuda

#endif
