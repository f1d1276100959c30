#include "backend/cuda_device_count.h"

#include "kernels/cuda/gpu_runtime.h"

namespace mt {

int cuda_device_count() {
  int count = 0;
  // On a machine without a driver the call fails and leaves count unset: never read it then.
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky error for whoever asks next
    return -1;
  }
  return count;
}

}  // namespace mt
