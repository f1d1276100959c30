// NF4 (core/nf4.h) on the GPU, bit for bit the CPU format: dequantising a packed weight into f32
// or bf16 (the QLoRA base before each product, and Backend::convert) and quantising f32 rows
// (Backend::convert to nf4). Per-block math: kernels/device_math/nf4_block.h.
#pragma once
#include <cstdint>

#include "kernels/cuda/gpu_runtime.h"

namespace mt::cuda {

// dst [rows, cols] of T from the records at src (rows * nf4::row_bytes(cols) bytes).
template <class T>
void dequantize_nf4(T* dst, const uint8_t* src, int64_t rows, int64_t cols, cudaStream_t stream);

// The records of `rows` rows of `cols` f32 values (every byte written, padding zero). One block
// per row keeps the row's block maxima in shared memory: cols up to kNf4QuantizeMaxCols
// (mt::Error beyond).
inline constexpr int64_t kNf4QuantizeMaxCols = 64 * 8192;
void quantize_nf4(uint8_t* dst, const float* src, int64_t rows, int64_t cols, cudaStream_t stream);

}  // namespace mt::cuda
