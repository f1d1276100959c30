// The one include of cuBLASLt's header (see gpu_runtime.h for why vendor headers have one door).
#pragma once

#if defined(MESHTRAIN_CUDA_ON_CPU)
#include "kernels/cuda_on_cpu/cublasLt.h"  // emulated on the CPU (docs/gpu.md)
#else
#include <cublasLt.h>
#endif

#include "kernels/cuda/gpu_runtime.h"
