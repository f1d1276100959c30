// Packing examples into fixed-length rows: several whole examples back to back per row, with
// positions restarting per example and a segment id per example so attention never crosses an
// example boundary (see docs/data.md).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "data/example_table.h"

namespace mt {

// [batch_size, seq_len] row-major. targets[t] = tokens[t + 1] when t + 1 is in the same example
// and trained there, else -1 (never across an example boundary, never after an example's last
// token, never on padding). positions restart at 0 per example. segments: 0, 1, 2, ... for
// the examples of a row in order, then one more id for the padding at its end (token 0,
// position 0, 1, ..., target -1). padding: 1 on that padding, 0 elsewhere (what HF's attention
// mask leaves out: a mixture of experts' routing losses do not count it); empty: none.
struct PackedBatch {
  std::vector<int32_t> tokens, targets, positions, segments, padding;
  int64_t batch_size = 0, seq_len = 0;
};

// Rows as lists of example ids: row r holds ids[starts[r] .. starts[r + 1]).
struct RowPlan {
  std::vector<uint32_t> ids;
  std::vector<uint64_t> starts{0};
  int64_t num_rows() const { return int64_t(starts.size()) - 1; }
  std::span<const uint32_t> row(int64_t r) const {
    return std::span<const uint32_t>(ids).subspan(starts[size_t(r)], starts[size_t(r + 1)] - starts[size_t(r)]);
  }
};

// Greedy (next-fit) packing in the given order: an example goes into the current row when it
// fits, else it starts a new row. mt::Error when an example is longer than seq_len (the reader
// skips or truncates those first).
RowPlan plan_rows(const ExampleTable& table, std::span<const uint32_t> order, int64_t seq_len);

// Writes row `row` of `batch` (already sized) from the examples `ids`.
void fill_row(PackedBatch& batch, int64_t row, const ExampleTable& table,
              std::span<const uint32_t> ids);

PackedBatch make_packed_batch(int64_t batch_size, int64_t seq_len);

// A fixed train/validation split of n examples: a seed-shuffled order's last
// floor(n * val_fraction) examples are validation. Both lists come back sorted (file order).
// mt::Error when a requested split would be empty.
struct ExampleSplit {
  std::vector<uint32_t> train, val;
};
ExampleSplit split_examples(size_t n, double val_fraction, uint64_t seed);

}  // namespace mt
