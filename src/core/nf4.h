// NF4, the 4-bit NormalFloat of QLoRA (Dettmers et al. 2023), with double quantisation: the storage
// format of a frozen LoRA base quantised to 4 bits (DType::nf4). This file is the format's one
// definition; the backends' kernels (kernels/cpu/nf4, kernels/reference/nf4) read and write it.
//
// Codes: 16 values, quantiles of N(0, 1) with an exact zero, normalised to [-1, 1] (codebook()).
// A weight w of a block with absolute maximum a is stored as the code nearest w / a.
//
// Layout: a tensor [rows, cols] is `rows` records of row_bytes(cols) bytes, one per row, so a
// row range is a contiguous byte range (FSDP's shards, tensor parallelism's column-parallel
// splits and every gather cut between rows, never inside a block). A record holds:
//   - groups x {f32 scale, f32 offset}: the double quantisation of the block maxima, one pair per
//     group; the row's blocks fall into groups_per_row equal groups of at most kGroup (the last may
//     be shorter), so power-of-two tp splits of wide rows fall between groups or inside one;
//   - blocks x u8: each block's absolute maximum a, as round((a - offset) / scale) + 128;
//   - blocks x 32 bytes: the 64 codes, two per byte, the first in the high nibble;
//   - zero padding to a multiple of 4 bytes.
// Blocks are kBlock consecutive weights of a row; a row whose length is not a multiple of kBlock
// ends in a block padded with zeros (zero is an exact code, and padding never changes a maximum).
// So blocks and groups never cross a row: unlike bitsandbytes' flat layout, which blocks the
// flattened tensor, any cut between rows leaves every block and group whole.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>

#include "core/bf16.h"

namespace mt::nf4 {

inline constexpr int64_t kBlock = 64;   // weights per block (one absmax each)
inline constexpr int64_t kGroup = 256;  // most blocks in a double-quantisation group

// The 16 NF4 values, ascending, derived from the normal quantiles as in the QLoRA paper.
const std::array<float, 16>& codebook();
// The standard normal quantile function (inverse CDF), for p in (0, 1).
double normal_quantile(double p);
// The code whose value is nearest x (x in [-1, 1]; outside it clamps to the end codes).
uint8_t nearest_code(float x);

inline int64_t blocks_per_row(int64_t cols) { return (cols + kBlock - 1) / kBlock; }
inline int64_t groups_per_row(int64_t cols) { return (blocks_per_row(cols) + kGroup - 1) / kGroup; }
inline int64_t row_bytes(int64_t cols) {
  const int64_t b = blocks_per_row(cols), raw = 8 * groups_per_row(cols) + b + b * kBlock / 2;
  return (raw + 3) / 4 * 4;
}
inline size_t tensor_bytes(int64_t rows, int64_t cols) { return size_t(rows * row_bytes(cols)); }

// Quantises `rows` rows of `cols` f32 values (row-major) into their records at dst.
void quantize_rows(uint8_t* dst, const float* src, int64_t rows, int64_t cols);
// The records of columns [c0, c1) of whole rows (tensor parallelism's column split of a
// row-parallel weight): block maxima and group statistics come from the whole row, so the slice
// holds exactly the bytes a single device's blocks would; each slice group carries its whole-row
// group's scale and offset. Needs slice_keeps_groups.
void quantize_row_slice(uint8_t* dst, const float* src, int64_t rows, int64_t cols, int64_t c0, int64_t c1);
// Whether columns [c0, c1) of a row of `cols` are whole blocks (the row's end may be padded) whose
// groups, as a row of c1 - c0 columns has them, each lie in one group of the whole row.
bool slice_keeps_groups(int64_t cols, int64_t c0, int64_t c1);
// Dequantises records back to values: each weight is code * (offset + scale * (q - 128)).
void dequantize_rows(float* dst, const uint8_t* src, int64_t rows, int64_t cols);
void dequantize_rows(bf16* dst, const uint8_t* src, int64_t rows, int64_t cols);

// The pieces of one record, for kernels and tests.
struct RowView {
  const uint8_t* base;
  int64_t cols;
  float scale(int64_t group) const;
  float offset(int64_t group) const;
  uint8_t qmax(int64_t block) const { return base[8 * groups_per_row(cols) + block]; }
  // The block's absolute maximum after double quantisation.
  float absmax(int64_t block) const;
  uint8_t code(int64_t i) const {
    const uint8_t byte = base[8 * groups_per_row(cols) + blocks_per_row(cols) + i / 2];
    return i % 2 == 0 ? byte >> 4 : byte & 15;
  }
};

}  // namespace mt::nf4
