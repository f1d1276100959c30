// What the CUDA backend holds for Backend::matmul_group (cuda_backend_group.cu), in a header
// without the GPU runtime so that the planner prices it in any build (plan/memory_model.cpp):
// group_streams - 1 side streams, each with its own cuBLASLt handle and a workspace of the main
// one's size. They are made together at the backend's first group of two or more products that
// have an output and no 4-bit weight (an MoE layer's experts: model/expert_products.h) and kept
// until the backend is destroyed; a model without such a group never makes them.
#pragma once
#include "kernels/cuda/cublaslt_workspace.h"

namespace mt {

// CudaBackendOptions::group_streams's default: the backend's own stream and three side streams.
inline constexpr int kCudaGroupStreams = 4;

// Device bytes of the side streams' workspaces once made (none with one stream).
constexpr double cuda_group_workspace_bytes(int group_streams = kCudaGroupStreams) {
  return group_streams > 1 ? double(group_streams - 1) * double(cuda::kCublasLtWorkspaceBytes) : 0.0;
}

}  // namespace mt
