// An exact software model of AMX-BF16's TDPBF16PS and an emulated "tile ISA" (the tile registers,
// TILECFG, TILELOADD, TILESTORED, TILEZERO, TDPBF16PS, TILERELEASE) that the AMX tile product
// (amx_tile_product.h) runs on where the CPU has no AMX: every machine this project builds and
// tests on. Emulated instructions check what the hardware faults on (#UD / #GP: no configuration,
// shapes that do not match, a row or column past a tile), so a tiling bug fails a test here
// instead of only on a Sapphire Rapids.
//
// What is modelled (Intel SDM vol. 2, TDPBF16PS "Operation", read 2026-12-07 in public copies of
// that page's pseudo-code), for each row m of the destination and each output column n:
//     t0 = +0, t1 = +0
//     for k in 0 .. tsrc1.colsb/4 - 1 (the pairs, ascending):
//         t0 = fma(f32(A[m].pair[k].even), f32(B[k].pair[n].even), t0)
//         t1 = fma(f32(A[m].pair[k].odd),  f32(B[k].pair[n].odd),  t1)
//     C[m][n] = C[m][n] + (t0 + t1)
// every step with DAZ inputs, FTZ outputs and round-to-nearest-even, MXCSR ignored. So unlike
// VDPBF16PS (bf16_dot.h), which folds both products of a pair into the accumulator in turn, one
// instruction keeps the even and the odd products in two partial sums that start from zero and
// meet the destination once, at the end: results depend on how k is cut into instructions (16
// pairs each here, the last one shorter), and the model follows that cut exactly. The fma steps
// reuse bf16_dot.h's fma_daz_ftz (tininess after rounding, as x86 detects it); the two adds are
// exact below 2^-126 (sums of multiples of 2^-149), so flushing their result needs no care.
// A partial sum that starts at +0 never becomes -0 under round-to-nearest, so zero-padded pairs
// (0 * x) leave it unchanged: a k cut shorter than 16 and one padded with zeros to 16 agree.
//
// Only hardware can confirm this: the model follows the SDM's pseudo-code, and no CPU with AMX was
// available to check it against (the way bf16_dot.h's model is checked against this CPU's FMA).
// NaN payloads are not modelled (a NaN stays a NaN).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/error.h"
#include "kernels/cpu/amx_tile_product.h"
#include "kernels/cpu/bf16_dot.h"

namespace mt::attn {

// x + y with DAZ inputs, RNE, FTZ result (exact when tiny: see above).
inline float add_daz_ftz(float x, float y) {
  auto daz = [](float v) { return std::fpclassify(v) == FP_SUBNORMAL ? std::copysign(0.0f, v) : v; };
  const float r = daz(x) + daz(y);
  return std::fabs(r) < 0x1p-126f ? std::copysign(0.0f, r) : r;
}

// One destination element of one TDPBF16PS: c + (even sum + odd sum) over K pairs, a[k] the
// A row's pairs, b[k * bstride] the B column's.
inline float tdpbf16ps_element(float c, const uint32_t* a, const uint32_t* b, int64_t bstride,
                               int64_t K) {
  float t0 = 0.0f, t1 = 0.0f;
  for (int64_t k = 0; k < K; ++k) {
    const uint32_t x = a[k], y = b[k * bstride];
    t0 = fma_daz_ftz(bf16_in_daz(x), bf16_in_daz(y), t0);
    t1 = fma_daz_ftz(bf16_in_daz(x >> 16), bf16_in_daz(y >> 16), t1);
  }
  return add_daz_ftz(c, add_daz_ftz(t0, t1));
}

// The tile registers of one thread (the hardware's are per thread too).
struct AmxTileState {
  bool configured = false;
  uint8_t rows[8] = {};
  uint16_t colsb[8] = {};
  alignas(64) unsigned char t[8][16 * 64] = {};
};

inline AmxTileState& amx_emulated_state() {
  static thread_local AmxTileState s;
  return s;
}

// The tile ISA of amx_tile_product.h in software. Tile numbers are template arguments, as the
// real instructions need them as immediates.
struct AmxTilesEmulated {
  [[noreturn]] static void fault(const std::string& what) {
    fail("emulated AMX: " + what + " (the hardware would fault)");
  }
  static AmxTileState& configured() {
    AmxTileState& s = amx_emulated_state();
    if (!s.configured) fault("tile instruction without a tile configuration");
    return s;
  }
  // LDTILECFG: palette 1 (8 tiles of at most 16 rows x 64 bytes), the rest zero; all tiles zeroed.
  static void config(const AmxTileConfig* c) {
    AmxTileState& s = amx_emulated_state();
    if (c->palette_id == 0) return release();
    if (c->palette_id != 1 || c->start_row != 0) fault("palette other than 1 or a start row");
    for (int i = 0; i < 14; ++i)
      if (c->reserved[i]) fault("reserved config bytes set");
    for (int i = 0; i < 16; ++i) {
      const bool used = i < 8;
      if (!used && (c->colsb[i] || c->rows[i])) fault("a tile past the palette's 8 configured");
      if (used && (c->rows[i] > 16 || c->colsb[i] > 64)) fault("a tile larger than 16 x 64 bytes");
      if (used && (c->rows[i] == 0) != (c->colsb[i] == 0)) fault("a tile with rows xor columns");
    }
    s.configured = true;
    for (int i = 0; i < 8; ++i) s.rows[i] = c->rows[i], s.colsb[i] = c->colsb[i];
    std::memset(s.t, 0, sizeof s.t);
  }
  static void release() {
    AmxTileState& s = amx_emulated_state();
    s.configured = false;
    std::memset(s.t, 0, sizeof s.t);
  }
  template <int T>
  static unsigned char* tile(AmxTileState& s) {
    static_assert(T >= 0 && T < 8);
    if (s.rows[T] == 0) fault("tile " + std::to_string(T) + " is not configured");
    return s.t[T];
  }
  template <int T>
  static void zero() {
    AmxTileState& s = configured();
    std::memset(tile<T>(s), 0, 16 * 64);
  }
  // TILELOADD: rows x colsb bytes from p (rows stride bytes apart); the rest of the tile zeroed.
  template <int T>
  static void load(const void* p, int64_t stride) {
    AmxTileState& s = configured();
    unsigned char* t = tile<T>(s);
    std::memset(t, 0, 16 * 64);
    for (int r = 0; r < s.rows[T]; ++r)
      std::memcpy(t + r * 64, static_cast<const char*>(p) + r * stride, s.colsb[T]);
  }
  template <int T>
  static void store(void* p, int64_t stride) {
    AmxTileState& s = configured();
    const unsigned char* t = tile<T>(s);
    for (int r = 0; r < s.rows[T]; ++r)
      std::memcpy(static_cast<char*>(p) + r * stride, t + r * 64, s.colsb[T]);
  }
  // TDPBF16PS tC, tA, tB with the SDM's shape checks.
  template <int C, int A, int B>
  static void dp() {
    static_assert(C != A && C != B && A != B, "TDPBF16PS needs three different tiles");
    AmxTileState& s = configured();
    unsigned char *tc = tile<C>(s), *ta = tile<A>(s), *tb = tile<B>(s);
    if (s.colsb[C] % 4 || s.colsb[A] % 4 || s.colsb[B] % 4) fault("colsb not a multiple of 4");
    if (s.rows[C] != s.rows[A] || s.colsb[C] != s.colsb[B] || s.colsb[A] / 4 != s.rows[B])
      fault("tile shapes do not match");
    const int K = s.colsb[A] / 4, N = s.colsb[C] / 4;
    for (int m = 0; m < s.rows[C]; ++m) {
      uint32_t arow[16];
      std::memcpy(arow, ta + m * 64, 64);
      for (int n = 0; n < N; ++n) {
        uint32_t bcol[16];
        for (int k = 0; k < K; ++k) std::memcpy(&bcol[k], tb + k * 64 + n * 4, 4);
        float c;
        std::memcpy(&c, tc + m * 64 + n * 4, 4);
        c = tdpbf16ps_element(c, arow, bcol, 1, K);
        std::memcpy(tc + m * 64 + n * 4, &c, 4);
      }
    }
  }
};

}  // namespace mt::attn
