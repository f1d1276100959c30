// The CUDA backend (docs/gpu.md): every op of backend.h on one NVIDIA GPU, on one CUDA stream,
// with cuBLASLt for the products and the kernels of kernels/cuda/ for the rest. It exists only in
// a build configured with -DMESHTRAIN_CUDA=ON (which defines MESHTRAIN_CUDA=1); this header names
// no CUDA type, so any floor above backend may include it there.
#pragma once
#include <memory>

#include "backend/backend.h"

namespace mt {

// The backend of GPU `device_index` (0-based, as the CUDA runtime counts them). Throws mt::Error,
// one line, when there is no usable GPU: no driver, a driver older than the runtime this build
// was linked with (both versions named), no device, or an index past the devices found.
std::unique_ptr<Backend> make_cuda_backend(int device_index);

}  // namespace mt
