// NF4 (core/nf4.h) to and from floats, rows in parallel: a frozen 4-bit base is dequantised into
// the GEMM's dtype just before each product, and quantised once as it is loaded.
#pragma once
#include <cstdint>

#include "core/bf16.h"

namespace mt {

template <class T>
void dequantize_nf4(T* dst, const uint8_t* src, int64_t rows, int64_t cols);
void quantize_nf4(uint8_t* dst, const float* src, int64_t rows, int64_t cols);

}  // namespace mt
