// The one include through which GPU kernels and the CUDA backend reach the vendor runtime. Kernel
// sources never include <cuda_runtime.h> (or cuBLASLt, NCCL) themselves: a HIP build maps these
// names in one vendor header here, as ggml does, so the same sources compile for AMD GPUs.
// Warp-wide code uses kWarpSize, never a literal 32 (CDNA wavefronts are 64 wide).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace mt::cuda {

inline constexpr int kWarpSize = 32;

}  // namespace mt::cuda
