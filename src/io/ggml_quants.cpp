#include "io/ggml_quants.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/f16.h"

namespace mt {

namespace {

void check_whole_blocks(int64_t n) {
  MT_CHECK(n >= 0 && n % kGgmlQuantBlock == 0, "ggml block quantisation needs a multiple of 32 values");
}

void put_scale(char* block, float d) {
  const uint16_t h = float_to_f16(d);
  std::memcpy(block, &h, 2);
}

float get_scale(const char* block) {
  uint16_t h;
  std::memcpy(&h, block, 2);
  return f16_to_float(h);
}

}  // namespace

void quantize_q8_0(const float* x, int64_t n, char* out) {
  check_whole_blocks(n);
  for (int64_t b = 0; b < n / kGgmlQuantBlock; ++b, x += kGgmlQuantBlock, out += kQ8_0BlockBytes) {
    float amax = 0.0f;
    for (int64_t j = 0; j < kGgmlQuantBlock; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float inv = d != 0.0f ? 1.0f / d : 0.0f;  // an all-zero block: scale 0, codes 0
    put_scale(out, d);
    for (int64_t j = 0; j < kGgmlQuantBlock; ++j) {
      const int8_t q = int8_t(std::lround(x[j] * inv));  // |x * inv| <= 127 (+ rounding): fits
      std::memcpy(out + 2 + j, &q, 1);
    }
  }
}

void dequantize_q8_0(const char* in, int64_t n, float* y) {
  check_whole_blocks(n);
  for (int64_t b = 0; b < n / kGgmlQuantBlock; ++b, in += kQ8_0BlockBytes, y += kGgmlQuantBlock) {
    const float d = get_scale(in);
    for (int64_t j = 0; j < kGgmlQuantBlock; ++j) y[j] = float(int8_t(in[2 + j])) * d;
  }
}

void quantize_q4_0(const float* x, int64_t n, char* out) {
  check_whole_blocks(n);
  constexpr int64_t half = kGgmlQuantBlock / 2;
  for (int64_t b = 0; b < n / kGgmlQuantBlock; ++b, x += kGgmlQuantBlock, out += kQ4_0BlockBytes) {
    float amax = 0.0f, m = 0.0f;  // the first value of largest magnitude, with its sign
    for (int64_t j = 0; j < kGgmlQuantBlock; ++j)
      if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]), m = x[j];
    const float d = m / -8.0f;
    const float inv = d != 0.0f ? 1.0f / d : 0.0f;
    put_scale(out, d);
    // round(v / d) + 8 as floor(v / d + 8.5): v / d lies in [-8, 8], so the sum is never negative.
    auto code = [inv](float v) { return uint8_t(std::min(15, int(v * inv + 8.5f))); };
    for (int64_t j = 0; j < half; ++j)
      out[2 + j] = char(code(x[j]) | (code(x[j + half]) << 4));
  }
}

void dequantize_q4_0(const char* in, int64_t n, float* y) {
  check_whole_blocks(n);
  constexpr int64_t half = kGgmlQuantBlock / 2;
  for (int64_t b = 0; b < n / kGgmlQuantBlock; ++b, in += kQ4_0BlockBytes, y += kGgmlQuantBlock) {
    const float d = get_scale(in);
    for (int64_t j = 0; j < half; ++j) {
      const uint8_t byte = uint8_t(in[2 + j]);
      y[j] = float(int(byte & 0x0f) - 8) * d;
      y[j + half] = float(int(byte >> 4) - 8) * d;
    }
  }
}

}  // namespace mt
