#include "core/f16.h"

#include <cstring>

namespace mt {

namespace {
// Shift m right by s bits, rounding to nearest with ties to even (s in 1..31).
uint32_t shift_round_even(uint32_t m, int s) {
  const uint32_t q = m >> s, rem = m & ((1u << s) - 1), halfway = 1u << (s - 1);
  return q + ((rem > halfway || (rem == halfway && (q & 1u))) ? 1u : 0u);
}
}  // namespace

uint16_t float_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = uint16_t((x >> 16) & 0x8000u);
  const uint32_t a = x & 0x7fffffffu;
  if (a >= 0x7f800000u)  // inf, or NaN with its top payload bits kept and the quiet bit set
    return uint16_t(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u | ((a >> 13) & 0x3ffu) : 0u));
  // 65520 = 65504 + half an ulp: the tie rounds to the even neighbour, which is infinity.
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);
  const int e = int(a >> 23);  // biased f32 exponent
  if (e < 113) {
    // Below 2^-14: a half subnormal, counted in units of 2^-24. value = m * 2^(e - 150), so the
    // count is m * 2^(e - 126). A carry into 0x400 is exactly the smallest normal's encoding.
    const int s = 126 - e;
    if (s > 24) return sign;  // m < 2^24, so the value is below half a unit
    const uint32_t m = (a & 0x7fffffu) | 0x800000u;
    return uint16_t(sign | shift_round_even(m, s));
  }
  // Normal: rebias the exponent (127 -> 15) and round the 23-bit mantissa to 10 bits; a carry
  // out of the mantissa correctly bumps the exponent.
  const uint32_t h = (uint32_t(e - 112) << 10) | ((a & 0x7fffffu) >> 13);
  const uint32_t rem = a & 0x1fffu;
  return uint16_t(sign | (h + ((rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ? 1u : 0u)));
}

float f16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  uint32_t x;
  if (e == 0x1f) {
    x = sign | 0x7f800000u | (m << 13);
  } else if (e != 0) {
    x = sign | ((e + 112) << 23) | (m << 13);
  } else if (m == 0) {
    x = sign;
  } else {  // subnormal: normalise the mantissa
    int shift = 0;
    uint32_t mm = m;
    while (!(mm & 0x400u)) mm <<= 1, ++shift;
    x = sign | (uint32_t(113 - shift) << 23) | ((mm & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

}  // namespace mt
