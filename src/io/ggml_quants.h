// ggml's two simplest block quantisations, as GGUF stores them (llama.cpp reads them directly):
//   Q8_0: blocks of 32 values, each block an f16 scale d = amax / 127 followed by 32 int8
//         q = round(v / d); a value is q * d.
//   Q4_0: blocks of 32 values, each block an f16 scale d = m / -8 (m the value of largest
//         magnitude, with its sign) followed by 16 bytes of 4-bit codes q = round(v / d) + 8
//         clamped to 15; byte j holds element j in its low nibble and element j + 16 in its high
//         nibble; a value is (q - 8) * d. m itself is code 0 (exactly -8 * d); the opposite end
//         reaches only +7 * d, hence the clamp.
// The codes are computed with the f32 scale and stored with its f16 rounding, as ggml's
// reference quantiser does, so a value's error is at most d / 2 plus the scale's rounding
// times |q| (tests/test_gguf_quants.cpp bounds it).
#pragma once
#include <cstddef>
#include <cstdint>

namespace mt {

inline constexpr int64_t kGgmlQuantBlock = 32;      // values per block, both types
inline constexpr size_t kQ8_0BlockBytes = 2 + 32;   // f16 d + 32 x int8
inline constexpr size_t kQ4_0BlockBytes = 2 + 16;   // f16 d + 32 x 4 bits

// n must be a multiple of 32; out holds n / 32 blocks.
void quantize_q8_0(const float* x, int64_t n, char* out);
void dequantize_q8_0(const char* in, int64_t n, float* y);
void quantize_q4_0(const float* x, int64_t n, char* out);
void dequantize_q4_0(const char* in, int64_t n, float* y);

}  // namespace mt
