// CUDA's bf16 storage types as host types for the CUDA-on-CPU build: two bytes, trivially
// copyable, converted only through their raw bits (the kernels round with
// kernels/device_math/bf16_round.h, never through these).
#pragma once
#include <cstdint>
#include <cstring>

#include "kernels/device_math/bf16_round.h"

struct __nv_bfloat16_raw {
  unsigned short x;
};

struct __nv_bfloat16 {
  unsigned short bits;
  __nv_bfloat16() = default;
  constexpr __nv_bfloat16(__nv_bfloat16_raw r) : bits(r.x) {}
  constexpr operator __nv_bfloat16_raw() const { return {bits}; }
};
static_assert(sizeof(__nv_bfloat16) == 2);

inline __nv_bfloat16 __float2bfloat16(float f) {
  return __nv_bfloat16_raw{mt::dm::f32_to_bf16_bits(f)};
}
inline float __bfloat162float(__nv_bfloat16 b) { return mt::dm::bf16_bits_to_f32(b.bits); }
