// NF4 (core/nf4.h) per block and per value, for the host and the GPU: the record layout's sizes,
// a block's double-quantised maximum, decoding a code and encoding a value. core/nf4.cpp stays the
// format's definition; tests/test_device_math.cpp checks these against it (layouts for every
// width up to several groups, every code of random records, nearest codes over a dense sweep).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/device_math/host_device.h"

namespace mt::dm {

inline constexpr int64_t kNf4Block = 64;   // = nf4::kBlock
inline constexpr int64_t kNf4Group = 256;  // = nf4::kGroup

// The 16 code values (nf4::codebook()), passed by value to kernels.
struct Nf4Codebook {
  float value[16];
};

// Where a row record's parts lie: groups x {f32 scale, f32 offset}, blocks x u8 maxima, then the
// codes two a byte, padded to a multiple of 4 bytes.
struct Nf4RowLayout {
  int64_t blocks, groups, group_size, bytes;
  MT_HOST_DEVICE int64_t maxima_at() const { return 8 * groups; }
  MT_HOST_DEVICE int64_t codes_at() const { return 8 * groups + blocks; }
};

MT_HOST_DEVICE Nf4RowLayout nf4_row_layout(int64_t cols) {
  Nf4RowLayout l;
  l.blocks = (cols + kNf4Block - 1) / kNf4Block;
  l.groups = (l.blocks + kNf4Group - 1) / kNf4Group;
  l.group_size = l.groups > 0 ? (l.blocks + l.groups - 1) / l.groups : 0;
  const int64_t raw = 8 * l.groups + l.blocks + l.blocks * kNf4Block / 2;
  l.bytes = (raw + 3) / 4 * 4;
  return l;
}

// A block's absolute maximum from its group's scale and offset and its stored byte.
MT_HOST_DEVICE float nf4_absmax(float scale, float offset, uint8_t qmax) {
  return offset + scale * float(int(qmax) - 128);
}

// Code i of a block or row whose codes start at `codes` (the first in the high nibble).
MT_HOST_DEVICE uint8_t nf4_code(const uint8_t* codes, int64_t i) {
  const uint8_t byte = codes[i / 2];
  return i % 2 == 0 ? uint8_t(byte >> 4) : uint8_t(byte & 15);
}

// Weight e (row-major) of a tensor of rows of `cols` whose records start at src: its row's
// record, block and group, then code * absmax in float (core/nf4.cpp's dequantiser). The GPU
// dequantises one weight per thread with this.
MT_HOST_DEVICE float nf4_weight(const uint8_t* src, const Nf4RowLayout& l, const Nf4Codebook& cb,
                                int64_t cols, int64_t e) {
  const int64_t r = e / cols, i = e % cols, b = i / kNf4Block, g = b / l.group_size;
  const uint8_t* rec = src + r * l.bytes;
  float scale, offset;
  memcpy(&scale, rec + 8 * g, 4);
  memcpy(&offset, rec + 8 * g + 4, 4);
  return cb.value[nf4_code(rec + l.codes_at(), i)] * nf4_absmax(scale, offset, rec[l.maxima_at() + b]);
}

// The code whose value is nearest x (nf4::nearest_code): midpoints decide, ties go up.
MT_HOST_DEVICE uint8_t nf4_nearest_code(float x, const Nf4Codebook& cb) {
  uint8_t code = 0;
  while (code < 15 && x >= 0.5f * (cb.value[code] + cb.value[code + 1])) ++code;
  return code;
}

// The largest |x| of a block's n values (std::max's rule, as core/nf4.cpp takes it).
MT_HOST_DEVICE float nf4_block_max(const float* x, int64_t n) {
  float a = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float v = fabsf(x[i]);
    a = a < v ? v : a;
  }
  return a;
}

// A double-quantisation group's statistics from its blocks' maxima amax[b0, b1): the offset is
// their mean (summed in double in block order), the scale the largest distance from it / 127.
struct Nf4GroupStats {
  float scale, offset;
};
MT_HOST_DEVICE Nf4GroupStats nf4_group_stats(const float* amax, int64_t b0, int64_t b1) {
  double sum = 0;
  for (int64_t b = b0; b < b1; ++b) sum += amax[b];
  const float offset = float(sum / double(b1 - b0));
  float spread = 0;
  for (int64_t b = b0; b < b1; ++b) {
    const float d = fabsf(amax[b] - offset);
    spread = spread < d ? d : spread;
  }
  return {spread / 127.0f, offset};
}

// The stored byte of a block maximum a in a group of (scale, offset): round((a - offset) / scale)
// + 128, clamped to [1, 255]; 128 when the group's maxima are all equal (scale 0).
MT_HOST_DEVICE uint8_t nf4_quantize_max(float a, float scale, float offset) {
  float q = scale > 0 ? nearbyintf((a - offset) / scale) : 0.0f;
  q = q < -127.0f ? -127.0f : (q > 127.0f ? 127.0f : q);
  return uint8_t(int(q) + 128);
}

// Byte j of a row's codes (weights 2j and 2j + 1, the first in the high nibble) from the row's
// values x [cols] and its blocks' exact maxima amax: each weight's code against its block's
// maximum; weights past cols (the last block's padding) get code 7, the exact zero.
MT_HOST_DEVICE uint8_t nf4_code_byte(const float* x, const float* amax, int64_t cols, int64_t j,
                                     const Nf4Codebook& cb) {
  uint8_t byte = 0;
  for (int64_t i = 2 * j; i < 2 * j + 2; ++i) {
    uint8_t c = 7;
    if (i < cols) {
      const float a = amax[i / kNf4Block];
      c = nf4_nearest_code(a > 0 ? x[i] / a : 0.0f, cb);
    }
    byte = uint8_t(i % 2 == 0 ? c << 4 : byte | c);
  }
  return byte;
}

}  // namespace mt::dm
