#include "data/packed_sampler.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "data/shuffle.h"

namespace mt {

PackedSampler::PackedSampler(const ExampleTable& table, std::vector<uint32_t> ids, int64_t seq_len,
                             int64_t batch_size, uint64_t seed)
    : table_(&table), ids_(std::move(ids)), seq_len_(seq_len), batch_size_(batch_size), seed_(seed) {
  if (batch_size <= 0) fail("packed sampler: batch_size must be > 0, got " + std::to_string(batch_size));
  if (ids_.empty()) fail("packed sampler: no training examples");
  for (uint32_t id : ids_) MT_CHECK(id < table.size(), "example id out of range");
  plan_ = plan_for(0);
}

RowPlan PackedSampler::plan_for(int64_t epoch) const {
  std::vector<uint32_t> order = shuffled_order(uint32_t(ids_.size()), seed_ + uint64_t(epoch));
  for (uint32_t& o : order) o = ids_[o];
  return plan_rows(*table_, order, seq_len_);
}

PackedBatch PackedSampler::next() {
  PackedBatch b = make_packed_batch(batch_size_, seq_len_);
  for (int64_t r = 0; r < batch_size_; ++r) {
    if (row_ == plan_.num_rows()) {
      ++epoch_;
      row_ = 0;
      plan_ = plan_for(epoch_);
    }
    fill_row(b, r, *table_, plan_.row(row_++));
  }
  rows_drawn_ += batch_size_;
  return b;
}

void PackedSampler::restore(const PackedSamplerState& s) {
  if (s.epoch < 0 || s.row < 0 || s.rows_drawn < 0)
    fail("packed sampler: cannot restore a negative position (epoch " + std::to_string(s.epoch) +
         ", row " + std::to_string(s.row) + ", rows " + std::to_string(s.rows_drawn) + ")");
  seed_ = s.seed;
  RowPlan plan = plan_for(s.epoch);
  if (s.row > plan.num_rows())
    fail("packed sampler: cannot restore row " + std::to_string(s.row) + " of epoch " +
         std::to_string(s.epoch) + ", which has " + std::to_string(plan.num_rows()) +
         " rows (was the data or seq_len changed?)");
  epoch_ = s.epoch;
  row_ = s.row;
  rows_drawn_ = s.rows_drawn;
  plan_ = std::move(plan);
}

void PackedSampler::restore(const SamplerState& s) {
  if (s.rows_drawn < 0)
    fail("packed sampler: cannot restore a negative row count " + std::to_string(s.rows_drawn));
  if (s.epoch >= 0 || s.row >= 0) {
    // Every row of the position was drawn, and every epoch before it had at least one row.
    if (s.row > s.rows_drawn || s.epoch > s.rows_drawn)
      fail("packed sampler: position (epoch " + std::to_string(s.epoch) + ", row " + std::to_string(s.row) +
           ") does not fit " + std::to_string(s.rows_drawn) + " rows drawn");
    restore(PackedSamplerState{s.seed, s.epoch, s.row, s.rows_drawn});
    return;
  }
  seed_ = s.seed;
  int64_t rows_left = s.rows_drawn;
  int64_t epoch = 0;
  RowPlan plan = plan_for(0);
  // Epochs differ in rows only by how their shuffled examples pack, so the first one's count
  // estimates how many a replay would plan, each costing a pass over the examples.
  if (s.rows_drawn / std::max<int64_t>(1, plan.num_rows()) > kMaxReplayEpochs)
    fail("packed sampler: " + std::to_string(s.rows_drawn) + " rows drawn is about " +
         std::to_string(s.rows_drawn / std::max<int64_t>(1, plan.num_rows())) + " epochs of " +
         std::to_string(plan.num_rows()) + " rows, more than the " + std::to_string(kMaxReplayEpochs) +
         " a restore without the sampler's epoch and row replays");
  // Stop at the exact end of an epoch rather than past it, as next() only moves on lazily.
  while (rows_left > plan.num_rows()) {
    rows_left -= plan.num_rows();
    plan = plan_for(++epoch);
  }
  epoch_ = epoch;
  row_ = rows_left;
  rows_drawn_ = s.rows_drawn;
  plan_ = std::move(plan);
}

PackedValidation::PackedValidation(const ExampleTable& table, const std::vector<uint32_t>& ids,
                                   int64_t seq_len, int64_t batch_size, int64_t max_rows)
    : table_(&table), seq_len_(seq_len), batch_size_(batch_size), max_rows_(max_rows) {
  if (batch_size <= 0)
    fail("packed validation: batch_size must be > 0, got " + std::to_string(batch_size));
  if (max_rows <= 0) fail("packed validation: max_rows must be > 0, got " + std::to_string(max_rows));
  plan_ = plan_rows(table, ids, seq_len);
}

bool PackedValidation::next(PackedBatch& out) {
  if (pos_ >= num_rows()) return false;
  const int64_t rows = std::min(batch_size_, num_rows() - pos_);
  out = make_packed_batch(rows, seq_len_);
  for (int64_t r = 0; r < rows; ++r) fill_row(out, r, *table_, plan_.row(pos_ + r));
  pos_ += rows;
  return true;
}

}  // namespace mt
