// The workspace each cuBLASLt handle is given (kernels/cuda/cublaslt_gemm.h), in a header without
// the GPU runtime, so that what the CUDA backend holds can be priced in a build without CUDA (the
// planner: backend/cuda_group_streams.h).
#pragma once
#include <cstddef>

namespace mt::cuda {

// A workspace of this size lets cuBLASLt use its split-K algorithms on Hopper.
inline constexpr size_t kCublasLtWorkspaceBytes = size_t(32) << 20;

}  // namespace mt::cuda
