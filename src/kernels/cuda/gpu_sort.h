// The vendor's device-wide radix sort (CUB; hipCUB under HIP), reached only through this header,
// as the runtime is through gpu_runtime.h. Radix sort is stable, which embedding_backward relies
// on for its fixed summation order.
#pragma once

#if defined(MESHTRAIN_CUDA_ON_CPU)
#include "kernels/cuda_on_cpu/cub_radix_sort.h"  // emulated on the CPU (docs/gpu.md)
#else
#include <cub/device/device_radix_sort.cuh>
#endif

#include "kernels/cuda/gpu_runtime.h"
