// The vendor's device-wide radix sort (CUB; hipCUB under HIP), reached only through this header,
// as the runtime is through gpu_runtime.h. Radix sort is stable, which embedding_backward relies
// on for its fixed summation order.
#pragma once

#include <cub/device/device_radix_sort.cuh>

#include "kernels/cuda/gpu_runtime.h"
