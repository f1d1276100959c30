// launch_kernel: the checks a GPU makes before it runs a launch, then the grid queued on the stream.
#include "kernels/cuda_on_cpu/launch.h"

#include <algorithm>
#include <map>
#include <string>
#include <mutex>

#include "kernels/cuda_on_cpu/block_run.h"
#include "kernels/cuda_on_cpu/function_attributes.h"
#include "kernels/cuda_on_cpu/stream.h"

namespace mt::cuda_on_cpu {
namespace {

struct Attributes {
  std::mutex mutex;
  std::map<std::string, size_t> max_dynamic_shared;
};
Attributes& attributes() {
  static Attributes* a = new Attributes;
  return *a;
}

// The launch error the runtime reports for `c`, or cudaSuccess. Limits of compute capability 9.0.
cudaError_t check_config(const LaunchConfig& c, int stream_device) {
  const uint64_t threads = uint64_t(c.block.x) * c.block.y * c.block.z;
  if (c.grid.x == 0 || c.grid.y == 0 || c.grid.z == 0 || threads == 0)
    return cudaErrorInvalidConfiguration;
  if (c.block.x > 1024 || c.block.y > 1024 || c.block.z > 64 || threads > 1024)
    return cudaErrorInvalidConfiguration;
  if (c.grid.x > 2147483647u || c.grid.y > 65535 || c.grid.z > 65535)
    return cudaErrorInvalidConfiguration;
  if (c.dynamic_shared > max_dynamic_shared(c.kernel)) return cudaErrorInvalidValue;
  // A kernel goes to a stream of the device the launching thread has selected.
  if (stream_device != current_device()) return cudaErrorInvalidResourceHandle;
  return cudaSuccess;
}

}  // namespace

void set_max_dynamic_shared(const char* kernel, size_t bytes) {
  Attributes& a = attributes();
  std::lock_guard<std::mutex> lock(a.mutex);
  a.max_dynamic_shared[kernel] = bytes;
}

size_t max_dynamic_shared(const char* kernel) {
  Attributes& a = attributes();
  std::lock_guard<std::mutex> lock(a.mutex);
  const auto it = a.max_dynamic_shared.find(kernel);
  return it == a.max_dynamic_shared.end() ? kDefaultSharedBytes
                                          : std::max(it->second, kDefaultSharedBytes);
}

void record_launch_error(cudaError_t e);  // runtime_api.cpp: the thread's last error

cudaError_t set_function_attribute(const char* kernel, cudaFuncAttribute attr, int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 ||
      size_t(value) > kOptInSharedBytes) {
    record_launch_error(cudaErrorInvalidValue);
    return cudaErrorInvalidValue;
  }
  set_max_dynamic_shared(kernel, size_t(value));
  return cudaSuccess;
}

void launch_kernel(const LaunchConfig& c, std::function<void()> thread_body) {
  std::shared_ptr<Stream> st = stream_handle(c.stream);
  if (device_faulted(st->device())) return record_launch_error(cudaErrorLaunchFailure);
  const cudaError_t e = check_config(c, st->device());
  if (e != cudaSuccess) return record_launch_error(e);
  const char* name = c.kernel;
  const dim3 grid = c.grid, block = c.block;
  const size_t shared = c.dynamic_shared;
  st->push(name, [name, grid, block, shared, body = std::move(thread_body)] {
    run_grid(name, grid, block, shared, body);
  }, Release::held);
}

}  // namespace mt::cuda_on_cpu
