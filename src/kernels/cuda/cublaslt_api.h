// The one include of cuBLASLt's header (see gpu_runtime.h for why vendor headers have one door).
// Under HIP, vendor_hip.h (through gpu_runtime.h) includes hipBLASLt and maps cuBLASLt's names.
#pragma once

#if !defined(MESHTRAIN_HIP)
#include <cublasLt.h>
#endif

#include "kernels/cuda/gpu_runtime.h"
