// Inverted dropout by a hashed mask (kernels/device_math/dropout_mask.h), for LoRA dropout: the
// same mask and arithmetic as the CPU kernel (kernels/cpu/dropout.h).
#pragma once
#include <cstdint>

#include "kernels/cuda/gpu_runtime.h"
#include "kernels/device_math/dropout_mask.h"

namespace mt::cuda {

// y[r, c] (+)= keep(r, c) ? x[r, c] / (1 - p) : 0 over a [rows, cols] row-major tensor; T float or bf16.
template <class T>
void dropout(T* y, const T* x, int64_t rows, int64_t cols, const DropoutMask& mask, bool accumulate,
             cudaStream_t stream);

}  // namespace mt::cuda
