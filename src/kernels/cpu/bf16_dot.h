// The bf16-pair dot product of AVX512-BF16's VDPBF16PS, as an exact software model, and the
// "ISA" interface the bf16 attention tiles are written against (attention_bf16_tiles.h).
//
// One lane of VDPBF16PS srcdest, src1, src2 (Intel SDM pseudo-code) is two FP32 FMAs, the odd
// (upper) bf16 pair first, then the even (lower) one:
//     acc = fma(f32(a[2i+1]), f32(b[2i+1]), acc);  acc = fma(f32(a[2i]), f32(b[2i]), acc)
// each with denormal inputs treated as zero (DAZ), denormal results flushed to zero (FTZ) and
// round-to-nearest-even, whatever MXCSR says. A bf16 widens to f32 exactly (its bits are the top
// half of the f32), so the model is fmaf plus the DAZ/FTZ rules. The model runs here, on a CPU
// without the instruction, so the bf16 attention path can be tested on every machine; the real
// instruction is used only on CPUs that have it (attention_bf16_native.cpp).
//
// FTZ detail: x86 detects tininess after rounding (as for an unbounded exponent range), so an
// exact result in [2^-126 - 2^-151, 2^-126) rounds to 2^-126 and stays, while a gradual-underflow
// fmaf would also round 2^-126 - 2^-150 (a tie on the denormal grid) up to 2^-126: that one case
// is recomputed exactly (tests/test_ops_attention_bf16.cpp checks the model against this CPU's
// FMA under MXCSR DAZ+FTZ, which flushes exactly so). NaN payloads are not modelled (a NaN stays
// a NaN).
#pragma once
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace mt::attn {

inline float f32_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// A bf16 (its 16 bits) widened to f32 with DAZ: a denormal becomes a zero of its sign.
inline float bf16_in_daz(uint32_t h) {
  uint32_t u = (h & 0xffffu) << 16;
  if ((u & 0x7f800000u) == 0) u &= 0x80000000u;
  return f32_bits(u);
}

// fma(a, b, c) rounded to nearest even, c's denormals read as zero, a tiny result (after
// rounding) flushed to a zero of its sign. a and b are widened bf16 values (DAZ already applied).
inline float fma_daz_ftz(float a, float b, float c) {
  if (std::fpclassify(c) == FP_SUBNORMAL) c = std::copysign(0.0f, c);
  const float r = std::fma(a, b, c);
  const float ar = std::fabs(r);
  if (ar < FLT_MIN) return std::copysign(0.0f, r);  // zero stays, denormal flushed
  if (ar == FLT_MIN) {
    // Exact in double here: a result this close to 2^-126 has all its bits within 2^-151..2^-124
    // (a*b has at most 16 significant bits). Tiny after rounding iff |x| < 2^-126 - 2^-151.
    const double x = std::fabs(double(a) * double(b) + double(c));
    if (x < double(FLT_MIN) - 0x1p-151) return std::copysign(0.0f, r);
  }
  return r;
}

// One lane: acc + a.hi*b.hi + a.lo*b.lo in the instruction's order. a and b hold a bf16 pair
// each, element 2i in the low 16 bits and 2i+1 in the high 16 bits (little-endian memory order).
inline float dpbf16_lane(float acc, uint32_t a, uint32_t b) {
  acc = fma_daz_ftz(bf16_in_daz(a >> 16), bf16_in_daz(b >> 16), acc);
  return fma_daz_ftz(bf16_in_daz(a), bf16_in_daz(b), acc);
}

// The interface the tile products use: 16 f32 accumulator lanes and 16 bf16 pairs a vector.
//   Acc zero(); Acc load(const float*); void store(float*, Acc);
//   Pairs load_pairs(const uint32_t*); Pairs splat(uint32_t); Acc dot(Acc, Pairs a, Pairs b)
// This one is the model above, lane by lane: exact, and slow (tests and forced runs only).
struct Bf16DotEmulated {
  static constexpr int kLanes = 16;
  struct Acc {
    float x[kLanes];
  };
  struct Pairs {
    uint32_t x[kLanes];
  };
  static Acc zero() { return Acc{}; }
  static Acc load(const float* p) {
    Acc a;
    std::memcpy(a.x, p, sizeof a.x);
    return a;
  }
  static void store(float* p, const Acc& a) { std::memcpy(p, a.x, sizeof a.x); }
  static Pairs load_pairs(const uint32_t* p) {
    Pairs v;
    std::memcpy(v.x, p, sizeof v.x);
    return v;
  }
  static Pairs splat(uint32_t w) {
    Pairs v;
    for (uint32_t& x : v.x) x = w;
    return v;
  }
  static Acc dot(Acc acc, const Pairs& a, const Pairs& b) {
    for (int i = 0; i < kLanes; ++i) acc.x[i] = dpbf16_lane(acc.x[i], a.x[i], b.x[i]);
    return acc;
  }
};

}  // namespace mt::attn
