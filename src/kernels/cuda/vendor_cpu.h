// The CUDA names the GPU sources use, as host C++ over the CUDA-on-CPU runtime
// (kernels/cuda_on_cpu/, the MESHTRAIN_CUDA_ON_CPU build): the third vendor header beside the real
// CUDA headers and vendor_hip.h. Kernels become plain functions whose threads the runtime runs as
// fibers; __shared__ variables are per worker thread, which runs one block at a time, so per block.
// A test harness (docs/gpu.md "CUDA executed on the CPU"), not a product backend.
#pragma once

#include <cmath>

#include "kernels/cuda_on_cpu/bf16.h"
#include "kernels/cuda_on_cpu/launch.h"
#include "kernels/cuda_on_cpu/runtime_api.h"
#include "kernels/cuda_on_cpu/thread_block.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static thread_local

#define MT_LAUNCH(kernel, grid, block, shared, stream)                                      \
  ::mt::cuda_on_cpu::make_launch(                                                          \
      #kernel, [](auto... mt_launch_args) { kernel(mt_launch_args...); }, grid, block, shared, \
      stream)
#define cudaFuncSetAttribute(kernel, attr, value) \
  ::mt::cuda_on_cpu::set_function_attribute(#kernel, attr, value)
#define MT_DYNAMIC_SHARED(T, name) \
  T* name = static_cast<T*>(::mt::cuda_on_cpu::dynamic_shared_memory())
