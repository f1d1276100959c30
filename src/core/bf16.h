// bfloat16 storage type: the top 16 bits of an IEEE float. Arithmetic is always done in float;
// this type only stores. Conversion rounds to nearest even, as hardware and PyTorch do.
#pragma once
#include <cstdint>
#include <cstring>
#include <cstddef>

namespace mt {

struct bf16 {
  uint16_t bits = 0;
};

inline float to_float(float x) { return x; }
inline float to_float(bf16 x) {
  uint32_t u = uint32_t(x.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline bf16 float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) {  // NaN: keep it a (quiet) NaN
    return bf16{uint16_t((u >> 16) | 0x40)};
  }
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
  return bf16{uint16_t(u >> 16)};
}

// from_float<T>(x): store a float as T (identity for float).
template <class T> inline T from_float(float x);
template <> inline float from_float<float>(float x) { return x; }
template <> inline bf16 from_float<bf16>(float x) { return float_to_bf16(x); }

// Bulk conversions (vectorised by the compiler).
void convert(bf16* dst, const float* src, size_t n);
void convert(float* dst, const bf16* src, size_t n);

}  // namespace mt
