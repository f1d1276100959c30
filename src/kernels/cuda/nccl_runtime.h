// The one include of the collective library for GPU code: NCCL on NVIDIA, RCCL on AMD (RCCL keeps
// NCCL's names and types, so only the header differs). Like gpu_runtime.h, nothing else includes
// <nccl.h> directly.
#pragma once

#include "kernels/cuda/gpu_runtime.h"

#if defined(MESHTRAIN_HIP)
#include <rccl/rccl.h>
#elif defined(MESHTRAIN_CUDA_ON_CPU)
#include "kernels/cuda_on_cpu/nccl.h"  // emulated over MPI on the CPU (docs/gpu.md)
#else
#include <nccl.h>
#endif
