// The vendor's device-wide radix sort (CUB; hipCUB under HIP; emulated in the CPU-executed build),
// reached only through this header, as the runtime is through gpu_runtime.h. Radix sort is stable,
// which embedding_backward relies on for its fixed summation order.
//
// Under HIP the sources keep CUB's spelling: `cub` names hipCUB's namespace, whose
// DeviceRadixSort has CUB's signatures (temporary storage query, then the sort, on a stream).
// hipCUB is not in Debian 12, so there a HIP compile of a file including this header stops here
// with one line; scripts/hip_compile_check.sh and CMake's MESHTRAIN_HIP leave those files out
// (cmake/hip_sources.cmake finds them by what they include).
#pragma once

#include "kernels/cuda/gpu_runtime.h"

#if defined(MESHTRAIN_CUDA_ON_CPU)
#include "kernels/cuda_on_cpu/cub_radix_sort.h"  // emulated on the CPU (docs/gpu.md)
#elif defined(MESHTRAIN_HIP)
#if __has_include(<hipcub/hipcub.hpp>)
#include <hipcub/hipcub.hpp>
namespace cub = hipcub;
#else
#error "kernels/cuda/gpu_sort.h: a HIP build needs hipCUB (<hipcub/hipcub.hpp>) for the radix sort"
#endif
#else
#include <cub/device/device_radix_sort.cuh>
#endif
