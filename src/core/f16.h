// IEEE 754 binary16 ("half", safetensors dtype F16) to float. Every half value is exactly
// representable as a float, so this conversion is exact: subnormals become normal floats,
// infinities stay infinite and NaNs stay NaN (payload kept in the top mantissa bits).
#pragma once
#include <cstdint>
#include <cstring>

namespace mt {

inline float f16_bits_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf (mant == 0) or NaN
  } else if (exp != 0) {
    bits = sign | ((exp + (127 - 15)) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;  // signed zero
  } else {
    // Subnormal: mant * 2^-24. Shift the leading 1 up to the implicit-bit position; each shift
    // halves the value, so it lowers the float exponent by one from the smallest normal's.
    uint32_t e = 127 - 15 + 1;
    while (!(mant & 0x400u)) {
      mant <<= 1;
      --e;
    }
    bits = sign | (e << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace mt
