// f32 <-> bf16 on raw bits, written once for the host and the GPU: round to nearest, ties to
// even, and a NaN stays a quiet NaN with its sign and top payload bits (core/bf16.h's rule, which
// tests/test_device_math.cpp checks for all 2^32 floats' classes and all 2^16 bf16 patterns).
// The GPU kernels use these instead of the vendor's __float2bfloat16, whose NaN is canonical, so
// both devices produce the same bits.
#pragma once
#include <cstdint>
#include <cstring>

#include "kernels/device_math/host_device.h"

namespace mt::dm {

MT_HOST_DEVICE uint32_t float_bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

MT_HOST_DEVICE float bits_float(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

MT_HOST_DEVICE uint16_t f32_to_bf16_bits(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu))  // NaN: keep it a (quiet) NaN
    return uint16_t((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even (carries into the exponent)
  return uint16_t(u >> 16);
}

MT_HOST_DEVICE float bf16_bits_to_f32(uint16_t b) { return bits_float(uint32_t(b) << 16); }

}  // namespace mt::dm
