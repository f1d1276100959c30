// Bits of bf16 values for the tests of the bf16 dot-product models (VDPBF16PS, TDPBF16PS): a
// value's 16 bits, a pair of them as the instructions read it, and bitwise float equality.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

namespace mt::test {

inline uint16_t bits_of(float x) {  // x must be a bf16 value
  uint32_t u;
  std::memcpy(&u, &x, 4);
  EXPECT_EQ(u & 0xffffu, 0u) << x << " is not a bf16 value";
  return uint16_t(u >> 16);
}
// A pair as one 32-bit word: lo (element 2i) in the low half, hi (2i + 1) in the high half.
inline uint32_t pair(float lo, float hi) { return uint32_t(bits_of(lo)) | uint32_t(bits_of(hi)) << 16; }
inline bool same_bits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

}  // namespace mt::test
