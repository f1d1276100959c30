// The bf16 x bf16 -> f32 tile product of the bf16 attention path on AMX tiles, written against a
// small "tile ISA" (the real instructions in attention_bf16_amx.cpp, the exact model in
// amx_tile_model.h), so the emulation runs this very loop: its configuration, blocking and edges.
// Operand layouts: attention_bf16_tiles.h (A: rows of bf16 pairs along k; B: K2 rows of N pairs,
// which is AMX's VNNI layout for the B tile as it stands). Templates and a plain struct only, as
// in bf16_tile_product.h: attention_bf16_amx.cpp includes this under an AMX target pragma.
//
// The tile ISA (tile numbers are template arguments: the instructions take them as immediates):
//   config(const AmxTileConfig*)  LDTILECFG        release()             TILERELEASE
//   zero<t>()                     TILEZERO         dp<c, a, b>()         TDPBF16PS tc, ta, tb
//   load<t>(const void*, stride)  TILELOADD        store<t>(void*, stride)  TILESTORED
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace mt::attn {

// The 64-byte LDTILECFG operand (Intel SDM vol. 1, "Tile configuration"): palette 1 has 8 tiles.
struct alignas(64) AmxTileConfig {
  uint8_t palette_id;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];  // bytes per row of tile i
  uint8_t rows[16];
};
static_assert(sizeof(AmxTileConfig) == 64);

// Tiles: C blocks 0..3 (16 x 16 f32, block (r, c) is tile 2r + c), A rows 4 and 5 (16 rows x 16
// pairs), B column blocks 6 and 7 (16 pair rows x 16 columns): a 32 x 32 block of C per pass
// over k, each A and B tile feeding two products. All tiles are full size in the one
// configuration; the edges (M, N or K2 not multiples of 16) go through zero-padded staging
// copies, which the model shows change no bit (zero pairs leave the partial sums as they are).
template <int MR, int NR, class F>
inline void amx_each_tile(F&& f) {
  using Z = std::integral_constant<int, 0>;
  using O = std::integral_constant<int, 1>;
  f(Z{}, Z{});
  if constexpr (NR > 1) f(Z{}, O{});
  if constexpr (MR > 1) f(O{}, Z{});
  if constexpr (MR > 1 && NR > 1) f(O{}, O{});
}

template <class Tiles, int MR, int NR>
inline void amx_block(float* c, int64_t ldc, const uint32_t* a, int64_t lda, const uint32_t* b,
                      int64_t ldb, int64_t M, int64_t N, int64_t K2, bool accumulate, int64_t i0,
                      int64_t j0) {
  alignas(64) float cst[MR * NR][256];  // staging of edge tiles, row stride 64 bytes
  alignas(64) uint32_t ast[MR][256], bst[NR][256];
  int64_t rows[MR], cols[NR];
  for (int r = 0; r < MR; ++r) rows[r] = M - i0 - 16 * r < 16 ? M - i0 - 16 * r : 16;
  for (int q = 0; q < NR; ++q) cols[q] = N - j0 - 16 * q < 16 ? N - j0 - 16 * q : 16;
  auto cptr = [&](int r, int q) { return c + (i0 + 16 * r) * ldc + j0 + 16 * q; };

  amx_each_tile<MR, NR>([&](auto R, auto Q) {
    constexpr int r = decltype(R)::value, q = decltype(Q)::value, t = 2 * r + q;
    if (!accumulate) return Tiles::template zero<t>();
    if (rows[r] == 16 && cols[q] == 16) return Tiles::template load<t>(cptr(r, q), ldc * 4);
    float* s = cst[r * NR + q];
    std::memset(s, 0, sizeof cst[0]);
    for (int64_t i = 0; i < rows[r]; ++i) std::memcpy(s + i * 16, cptr(r, q) + i * ldc, size_t(cols[q]) * 4);
    Tiles::template load<t>(s, 64);
  });

  for (int64_t p0 = 0; p0 < K2; p0 += 16) {
    const int64_t kp = K2 - p0 < 16 ? K2 - p0 : 16;
    amx_each_tile<MR, 1>([&](auto R, auto) {
      constexpr int r = decltype(R)::value;
      const uint32_t* src = a + (i0 + 16 * r) * lda + p0;
      if (rows[r] == 16 && kp == 16) return Tiles::template load<4 + r>(src, lda * 4);
      std::memset(ast[r], 0, sizeof ast[r]);
      for (int64_t i = 0; i < rows[r]; ++i) std::memcpy(ast[r] + i * 16, src + i * lda, size_t(kp) * 4);
      Tiles::template load<4 + r>(ast[r], 64);
    });
    amx_each_tile<1, NR>([&](auto, auto Q) {
      constexpr int q = decltype(Q)::value;
      const uint32_t* src = b + p0 * ldb + j0 + 16 * q;
      if (kp == 16 && cols[q] == 16) return Tiles::template load<6 + q>(src, ldb * 4);
      std::memset(bst[q], 0, sizeof bst[q]);
      for (int64_t p = 0; p < kp; ++p) std::memcpy(bst[q] + p * 16, src + p * ldb, size_t(cols[q]) * 4);
      Tiles::template load<6 + q>(bst[q], 64);
    });
    amx_each_tile<MR, NR>([&](auto R, auto Q) {
      constexpr int r = decltype(R)::value, q = decltype(Q)::value;
      Tiles::template dp<2 * r + q, 4 + r, 6 + q>();
    });
  }

  amx_each_tile<MR, NR>([&](auto R, auto Q) {
    constexpr int r = decltype(R)::value, q = decltype(Q)::value, t = 2 * r + q;
    if (rows[r] == 16 && cols[q] == 16) return Tiles::template store<t>(cptr(r, q), ldc * 4);
    float* s = cst[r * NR + q];
    Tiles::template store<t>(s, 64);
    for (int64_t i = 0; i < rows[r]; ++i) std::memcpy(cptr(r, q) + i * ldc, s + i * 16, size_t(cols[q]) * 4);
  });
}

// C[M x N] (+)= A[M x 2 K2] * B[2 K2 x N], f32 accumulation, any M, N, K2 >= 0. The tile
// configuration is loaded on entry and released on return: tile state is per thread, so each
// OpenMP thread calling this configures its own, and nothing is left configured for other code on
// the thread (oneDNN's AMX kernels load their own). LDTILECFG per call costs little next to the
// call's products (a 64 x 64 x 64 product is 32 TDPBF16PS).
template <class Tiles>
inline void amx_mm(float* c, int64_t ldc, const uint32_t* a, int64_t lda, const uint32_t* b,
                   int64_t ldb, int64_t M, int64_t N, int64_t K2, bool accumulate) {
  if (M <= 0 || N <= 0) return;
  AmxTileConfig cfg;
  std::memset(&cfg, 0, sizeof cfg);
  cfg.palette_id = 1;
  for (int t = 0; t < 8; ++t) cfg.rows[t] = 16, cfg.colsb[t] = 64;
  Tiles::config(&cfg);
  for (int64_t i0 = 0; i0 < M; i0 += 32) {
    const bool two_m = M - i0 > 16;
    for (int64_t j0 = 0; j0 < N; j0 += 32) {
      const bool two_n = N - j0 > 16;
      if (two_m && two_n) amx_block<Tiles, 2, 2>(c, ldc, a, lda, b, ldb, M, N, K2, accumulate, i0, j0);
      else if (two_m) amx_block<Tiles, 2, 1>(c, ldc, a, lda, b, ldb, M, N, K2, accumulate, i0, j0);
      else if (two_n) amx_block<Tiles, 1, 2>(c, ldc, a, lda, b, ldb, M, N, K2, accumulate, i0, j0);
      else amx_block<Tiles, 1, 1>(c, ldc, a, lda, b, ldb, M, N, K2, accumulate, i0, j0);
    }
  }
  Tiles::release();
}

}  // namespace mt::attn
