// Per-element math that the CPU tests and the GPU kernels share: a function marked MT_HOST_DEVICE
// compiles for the host under g++ and for both sides under nvcc/hipcc, so the arithmetic a kernel
// does on one element is written once and checked on the CPU against the reference kernels.
#pragma once

#if defined(__CUDACC__) || defined(__HIPCC__)
#define MT_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define MT_HOST_DEVICE inline
#endif
