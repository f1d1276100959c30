// The one include of cuBLASLt's header (see gpu_runtime.h for why vendor headers have one door).
#pragma once

#include <cublasLt.h>

#include "kernels/cuda/gpu_runtime.h"
