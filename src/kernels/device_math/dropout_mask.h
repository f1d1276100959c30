// Which elements dropout keeps, as a pure function of a key and the element's global (row,
// column), so that no mask is ever stored or sent: the backward recomputes the forward's mask,
// a recomputed (checkpointed) forward gets the same one, and ranks that hold the same rows and
// columns get the same one without talking. The CPU, reference and CUDA kernels all use this.
#pragma once
#include <cstdint>

#include "kernels/device_math/cp_positions.h"
#include "kernels/device_math/host_device.h"

namespace mt {

struct DropoutMask {
  uint64_t key = 0;   // one stream per use (a training step, a layer, a projection)
  float p = 0.0f;     // drop probability, [0, 1)
  int64_t row0 = 0;   // the global row of the tensor's row 0
  int64_t col0 = 0;   // the global column of its column 0 (a tensor-parallel shard starts later)
  // Rows that are a context-parallel share (cp > 1, kernels/device_math/cp_positions.h): row
  // row0 + r is token (row0 + r) % share_len of sequence (row0 + r) / share_len of the rank's
  // shares, which is that sequence's token cp_query_position(...) of cp share_len: the mask keys
  // by that true row, so cp ranks drop what one rank holding the whole sequences drops.
  int64_t cp = 1, cp_rank = 0, share_len = 0;
};

namespace dm {

// SplitMix64's finaliser: a bijection of 64-bit words that mixes every input bit into every
// output bit.
MT_HOST_DEVICE uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Elements whose 24-bit hash is below this are dropped: floor(p 2^24) of the 2^24 values, so the
// keep rate is 1 - p to within 2^-24.
MT_HOST_DEVICE uint32_t dropout_threshold(float p) { return uint32_t(double(p) * double(1 << 24)); }

// The row of the whole batch that the mask's row `row` is (itself unless the rows are a cp share).
MT_HOST_DEVICE int64_t dropout_global_row(const DropoutMask& m, int64_t row) {
  const int64_t r = m.row0 + row;
  if (m.cp == 1) return r;
  const int64_t seq = r / m.share_len, t = r % m.share_len;
  return seq * m.share_len * m.cp + cp_query_position(t, m.share_len, m.cp, m.cp_rank);
}

MT_HOST_DEVICE bool dropout_keeps(const DropoutMask& m, uint32_t threshold, int64_t row, int64_t col) {
  const uint64_t r = uint64_t(dropout_global_row(m, row)), c = uint64_t(m.col0 + col);
  const uint64_t h = mix64(m.key ^ mix64(r * 0x9e3779b97f4a7c15ULL + mix64(c + 0x632be59bd9b4e019ULL)));
  return uint32_t(h >> 40) >= threshold;
}

// The factor on a kept element: 1 / (1 - p) (inverted dropout keeps the expectation).
MT_HOST_DEVICE float dropout_scale(float p) { return 1.0f / (1.0f - p); }

}  // namespace dm
}  // namespace mt
