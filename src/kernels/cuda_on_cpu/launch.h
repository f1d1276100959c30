// Kernel launches of the CUDA-on-CPU runtime. `MT_LAUNCH(kernel, grid, block, shared, stream)(args)`
// (kernels/cuda/gpu_runtime.h) becomes make_launch(...)(args) over a generic lambda that calls the
// kernel by its name, so template kernels deduce their arguments as at a `<<<...>>>` launch. The
// arguments are copied when the launch is made, as a launch copies them to the device, and every
// GPU thread gets its own copy. The launch is checked against the limits an H100 enforces before
// it is queued on the stream; one the GPU would refuse sets the calling thread's last error
// (cudaGetLastError) and queues nothing.
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "kernels/cuda_on_cpu/runtime_api.h"

namespace mt::cuda_on_cpu {

struct LaunchConfig {
  const char* kernel = "";  // its name as written at the launch (and at cudaFuncSetAttribute)
  dim3 grid, block;
  size_t dynamic_shared = 0;
  cudaStream_t stream = nullptr;
};

// Validates and queues: `thread_body` runs once per GPU thread (as a fiber).
void launch_kernel(const LaunchConfig& config, std::function<void()> thread_body);

// cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes), keyed by the
// kernel's name as written (vendor_cpu.h makes the call a macro that passes it).
cudaError_t set_function_attribute(const char* kernel, cudaFuncAttribute attr, int value);

template <class Call>
class Launch {
 public:
  Launch(Call call, LaunchConfig config) : call_(std::move(call)), config_(config) {}

  template <class... Args>
  void operator()(Args&&... args) && {
    auto bound = std::make_tuple(std::decay_t<Args>(std::forward<Args>(args))...);
    launch_kernel(config_, [call = call_, bound]() { std::apply(call, bound); });
  }

 private:
  Call call_;
  LaunchConfig config_;
};

template <class Call>
Launch<Call> make_launch(const char* name, Call call, dim3 grid, dim3 block, size_t shared,
                         cudaStream_t stream) {
  return Launch<Call>(std::move(call), {name, grid, block, shared, stream});
}

}  // namespace mt::cuda_on_cpu
