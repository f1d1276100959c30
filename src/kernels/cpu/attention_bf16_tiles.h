// Packers of the bf16 attention path (internal to attention.cpp): they lay bf16 operands out as
// the tile product of bf16_tile_product.h reads them.
//
// Layouts, in 32-bit words each holding a bf16 pair (element 2p in the low half, as memory holds
// two consecutive bf16 on a little-endian CPU):
//   A operand ("rows"): word a[i * lda + p] = (A[i][2p], A[i][2p+1]): pairs along the summed k.
//   B operand ("VNNI"): word b[p * ldb + n] = (B[2p][n], B[2p+1][n]): the same k pairs, one
//   output column n a lane, 16 columns a vector, as VDPBF16PS wants them.
// k is padded with zeros to an even count, so a pair never reads past a tile.
#pragma once
#include <cstdint>
#include <cstring>

#include "core/bf16.h"

namespace mt::attn {

inline uint32_t pair_word(uint16_t lo, uint16_t hi) { return uint32_t(lo) | uint32_t(hi) << 16; }
inline uint16_t bf16_bits(float x) { return float_to_bf16(x).bits; }

// A-operand rows of a bf16 tile: dst[r * dw + p] = (src[r][2p], src[r][2p+1]) for r < rows,
// zero past d and in rows rows..rows_total. dw = padded d / 2. On a little-endian CPU a row's
// words are its bf16 values as they lie in memory: a byte copy.
inline void pack_rows(uint32_t* dst, int64_t dw, const bf16* src, int64_t stride, int64_t rows,
                      int64_t rows_total, int64_t d) {
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "pair words assume little-endian");
  for (int64_t r = 0; r < rows; ++r) {
    char* o = reinterpret_cast<char*>(dst + r * dw);
    std::memcpy(o, src + r * stride, size_t(d) * 2);
    std::memset(o + d * 2, 0, size_t(dw * 2 - d) * 2);
  }
  if (rows_total > rows) std::memset(dst + rows * dw, 0, sizeof(uint32_t) * (rows_total - rows) * dw);
}

// B operand from the rows of a bf16 tile whose row index is the summed k (V in P V, K in dS K,
// dO in P^T dO, Q in dS^T Q): dst[p * dp + c] = (src[2p][c], src[2p+1][c]); zero past d and for
// rows >= rows (rows_total even: the rows covered).
inline void pack_row_pairs(uint32_t* dst, int64_t dp, const bf16* src, int64_t stride,
                           int64_t rows, int64_t rows_total, int64_t d) {
  for (int64_t p = 0; p < rows_total / 2; ++p) {
    const int64_t r0 = 2 * p, r1 = 2 * p + 1;
    const bf16* s0 = src + r0 * stride;
    const bf16* s1 = src + r1 * stride;
    uint32_t* o = dst + p * dp;
    for (int64_t c = 0; c < d; ++c)
      o[c] = pair_word(r0 < rows ? s0[c].bits : 0, r1 < rows ? s1[c].bits : 0);
    for (int64_t c = d; c < dp; ++c) o[c] = 0;
  }
}

// B operand whose columns are the rows of a packed tile (K^T in Q K^T, V^T in dO V^T):
// dst[p * n + j] = rows[j * dw + p] for j < n (a word transpose).
inline void transpose_words(uint32_t* dst, const uint32_t* rows, int64_t dw, int64_t n) {
  for (int64_t j = 0; j < n; ++j)
    for (int64_t p = 0; p < dw; ++p) dst[p * n + j] = rows[j * dw + p];
}

// P or dS (f32 [rows x ld]) rounded to bf16 as an A operand: dst[i * (cols/2) + p] =
// (s[i][2p], s[i][2p+1]), cols even (<= 64): each row rounded in a simple loop the compiler can
// vectorise, then copied in as bytes (little-endian, as pack_rows).
inline void round_rows(uint32_t* dst, const float* s, int64_t ld, int64_t rows, int64_t cols) {
  const int64_t cw = cols / 2;
  uint16_t row[64];
  for (int64_t i = 0; i < rows; ++i) {
    const float* x = s + i * ld;
    for (int64_t j = 0; j < cols; ++j) row[j] = bf16_bits(x[j]);
    std::memcpy(dst + i * cw, row, size_t(cols) * 2);
  }
}

// P^T or dS^T rounded to bf16 as an A operand, pairs along the rows of s: dst[j * rw + p] =
// (s[2p][j], s[2p+1][j]) for j < cols, rows of s at or past `rows` read as zero; rw = rows_total / 2.
inline void round_transposed(uint32_t* dst, const float* s, int64_t ld, int64_t rows,
                             int64_t rows_total, int64_t cols) {
  const int64_t rw = rows_total / 2;
  for (int64_t p = 0; p < rw; ++p) {
    const int64_t r0 = 2 * p, r1 = 2 * p + 1;
    for (int64_t j = 0; j < cols; ++j) {
      const uint16_t lo = r0 < rows ? bf16_bits(s[r0 * ld + j]) : 0;
      const uint16_t hi = r1 < rows ? bf16_bits(s[r1 * ld + j]) : 0;
      dst[j * rw + p] = pair_word(lo, hi);
    }
  }
}

}  // namespace mt::attn
