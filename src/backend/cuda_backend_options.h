// make_cuda_backend with its choices spelled out, for the tests that compare them (a header of its
// own: the product's callers see only cuda_backend.h's defaults).
#pragma once
#include <memory>

#include "backend/backend.h"
#include "backend/cuda_group_streams.h"

namespace mt {

struct CudaBackendOptions {
  // Streams Backend::matmul_group spreads its products over, the backend's own included
  // (cuda_backend_group.cu); 1: one by one on the backend's stream, as matmul would. The default
  // is what the planner prices (cuda_group_streams.h).
  int group_streams = kCudaGroupStreams;
};

// make_cuda_backend (cuda_backend.h) with these options.
std::unique_ptr<Backend> make_cuda_backend(int device_index, const CudaBackendOptions& options);

}  // namespace mt
