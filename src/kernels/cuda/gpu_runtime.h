// The one include through which GPU kernels and the CUDA backend reach the vendor runtime. Kernel
// sources never include <cuda_runtime.h> (or cuBLASLt, NCCL) themselves: a HIP build maps these
// names in one vendor header here, as ggml does, so the same sources compile for AMD GPUs.
// Warp-wide code uses kWarpSize, never a literal 32 (CDNA wavefronts are 64 wide).
#pragma once

#if defined(MESHTRAIN_CUDA_ON_CPU)
#include "kernels/cuda/vendor_cpu.h"  // g++: the CUDA names as host C++ executed on the CPU
#elif defined(MESHTRAIN_HIP)
#include "kernels/cuda/vendor_hip.h"  // hipcc: the CUDA names below mapped to HIP
#else
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#endif

// MT_GPU_CODE: device code is being compiled (nvcc, hipcc, or the CPU-executed build), so kernels
// and __device__ helpers are visible. Tested instead of __CUDACC__, which g++ does not define.
#if defined(__CUDACC__) || defined(MESHTRAIN_CUDA_ON_CPU)
#define MT_GPU_CODE 1
#else
#define MT_GPU_CODE 0
#endif

// A kernel launch, written MT_LAUNCH(kernel, grid, block, shared_bytes, stream)(args...): the
// triple-chevron syntax on nvcc and hipcc, a runtime call in the CPU-executed build (whose
// compiler has no chevrons). Dynamic shared memory is declared with MT_DYNAMIC_SHARED(T, name).
#ifndef MT_LAUNCH
#define MT_LAUNCH(kernel, grid, block, shared, stream) kernel<<<grid, block, shared, stream>>>
#define MT_DYNAMIC_SHARED(T, name) extern __shared__ T name[]
#endif

namespace mt::cuda {

// Lanes of a warp: 32 on NVIDIA; on AMD the wavefront of the target being compiled (64 on CDNA,
// gfx90a and gfx942), and 64 in host code of a HIP build (its targets are CDNA).
#if defined(__AMDGCN_WAVEFRONT_SIZE)
inline constexpr int kWarpSize = __AMDGCN_WAVEFRONT_SIZE;
#elif defined(MESHTRAIN_HIP)
inline constexpr int kWarpSize = 64;
#else
inline constexpr int kWarpSize = 32;
#endif

}  // namespace mt::cuda
