// The one include of cuBLASLt's header (see gpu_runtime.h for why vendor headers have one door).
// Under HIP, vendor_hip.h (through gpu_runtime.h) includes hipBLASLt and maps cuBLASLt's names; in
// the CPU-executed build the emulation of kernels/cuda_on_cpu stands in for it.
#pragma once

#if defined(MESHTRAIN_CUDA_ON_CPU)
#include "kernels/cuda_on_cpu/cublasLt.h"  // emulated on the CPU (docs/gpu.md)
#elif !defined(MESHTRAIN_HIP)
#include <cublasLt.h>
#endif

#include "kernels/cuda/gpu_runtime.h"
