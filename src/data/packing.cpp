#include "data/packing.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/checked_math.h"
#include "core/error.h"
#include "data/shuffle.h"

namespace mt {

RowPlan plan_rows(const ExampleTable& table, std::span<const uint32_t> order, int64_t seq_len) {
  if (seq_len <= 0) fail("packing: seq_len must be > 0, got " + std::to_string(seq_len));
  RowPlan plan;
  plan.ids.reserve(order.size());
  int64_t used = 0;
  for (uint32_t id : order) {
    const int64_t len = table.length(id);
    if (len > seq_len)
      fail("packing: example " + std::to_string(id) + " has " + std::to_string(len) +
           " tokens, longer than the sequence length " + std::to_string(seq_len));
    if (used + len > seq_len) {
      plan.starts.push_back(plan.ids.size());
      used = 0;
    }
    plan.ids.push_back(id);
    used += len;
  }
  if (!plan.ids.empty()) plan.starts.push_back(plan.ids.size());
  return plan;
}

PackedBatch make_packed_batch(int64_t batch_size, int64_t seq_len) {
  PackedBatch b;
  b.batch_size = batch_size;
  b.seq_len = seq_len;
  const size_t n = size_t(mul_or_fail(batch_size, seq_len, "a batch's tokens (batch_size x seq_len)"));
  b.tokens.resize(n);
  b.targets.resize(n);
  b.positions.resize(n);
  b.segments.resize(n);
  b.padding.resize(n);
  return b;
}

void fill_row(PackedBatch& b, int64_t row, const ExampleTable& table, std::span<const uint32_t> ids) {
  const int64_t L = b.seq_len;
  const size_t base = size_t(row * L);
  int64_t t = 0;
  int32_t segment = 0;
  for (uint32_t id : ids) {
    auto tok = table.tokens(id);
    auto trained = table.trained(id);
    const int64_t n = int64_t(tok.size());
    MT_CHECK(t + n <= L, "packed row overflows seq_len");
    for (int64_t i = 0; i < n; ++i, ++t) {
      const size_t at = base + size_t(t);
      b.tokens[at] = tok[size_t(i)];
      b.targets[at] = i + 1 < n && trained[size_t(i + 1)] ? tok[size_t(i + 1)] : -1;
      b.positions[at] = int32_t(i);
      b.segments[at] = segment;
      b.padding[at] = 0;
    }
    ++segment;
  }
  for (int32_t p = 0; t < L; ++t, ++p) {
    const size_t at = base + size_t(t);
    b.tokens[at] = 0;
    b.targets[at] = -1;
    b.positions[at] = p;
    b.segments[at] = segment;
    b.padding[at] = 1;
  }
}

ExampleSplit split_examples(size_t n, double val_fraction, uint64_t seed) {
  if (!(val_fraction >= 0.0 && val_fraction < 1.0))
    fail("data.val_fraction must be in [0, 1), got " + std::to_string(val_fraction));
  if (n > UINT32_MAX) fail("too many examples: " + std::to_string(n));
  const size_t n_val = size_t(std::floor(double(n) * val_fraction));
  if (val_fraction > 0.0 && n_val == 0)
    fail("data has " + std::to_string(n) + " examples, too few for a validation split of " +
         std::to_string(val_fraction) + " (set data.val_fraction to 0 or use more data)");
  if (n_val >= n) fail("data has no training examples left after the validation split");
  // A stream of its own so the split does not correlate with the epoch shuffles.
  std::vector<uint32_t> order = shuffled_order(uint32_t(n), splitmix64(seed ^ 0x5151'7A11ull));
  ExampleSplit s;
  s.train.assign(order.begin(), order.end() - std::ptrdiff_t(n_val));
  s.val.assign(order.end() - std::ptrdiff_t(n_val), order.end());
  std::sort(s.train.begin(), s.train.end());
  std::sort(s.val.begin(), s.val.end());
  return s;
}

}  // namespace mt
