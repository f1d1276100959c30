// Batches of packed rows for training (shuffled per epoch, resumable) and for validation (fixed).
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "data/packing.h"
#include "data/text_dataset.h"  // SamplerState

namespace mt {

// Where a PackedSampler stands: the next batch starts at row `row` of epoch `epoch`.
// rows_drawn (over all epochs) is redundant with (epoch, row) but lets a trainer checkpoint keep
// storing a plain SamplerState {seed, rows_drawn}.
struct PackedSamplerState {
  uint64_t seed = 0;
  int64_t epoch = 0;
  int64_t row = 0;
  int64_t rows_drawn = 0;
};

// Epoch e packs the examples `ids` in the order shuffled_order(n, seed + e) (see shuffle.h), so
// every epoch has a new order and the whole stream depends only on the seed. Each batch has
// exactly batch_size rows; a batch that runs past the end of an epoch continues with the next
// one, so the stream of rows does not depend on how it is cut into batches. Keeps a reference to
// `table`.
class PackedSampler {
 public:
  PackedSampler(const ExampleTable& table, std::vector<uint32_t> ids, int64_t seq_len,
                int64_t batch_size, uint64_t seed);

  PackedBatch next();
  PackedSamplerState state() const { return {seed_, epoch_, row_, rows_drawn_}; }
  // mt::Error when the row is outside the epoch's rows or a count is negative.
  void restore(const PackedSamplerState& s);
  // From the trainer's plain sampler state: at its (epoch, row) when it has them, planning that
  // epoch alone; else (a checkpoint written before they were saved) by replaying the epoch plans
  // from the first, refused in one line when rows_drawn is more epochs than kMaxReplayEpochs.
  void restore(const SamplerState& s);
  SamplerState sampler_state() const { return {seed_, rows_drawn_, epoch_, row_}; }
  static constexpr int64_t kMaxReplayEpochs = 100000;

  int64_t epoch() const { return epoch_; }
  int64_t rows_in_epoch() const { return plan_.num_rows(); }
  int64_t batch_size() const { return batch_size_; }
  int64_t seq_len() const { return seq_len_; }

 private:
  RowPlan plan_for(int64_t epoch) const;

  const ExampleTable* table_;
  std::vector<uint32_t> ids_;
  int64_t seq_len_, batch_size_;
  uint64_t seed_;
  int64_t epoch_ = 0, row_ = 0, rows_drawn_ = 0;
  RowPlan plan_;  // of epoch_
};

// The validation examples packed once in file order, in batches of up to batch_size rows (the
// last may be smaller); only the first max_rows rows of the packing when there are more (a fixed
// budget, whatever the batch size). Fixed, so evaluations are comparable. Keeps a reference to
// `table`.
class PackedValidation {
 public:
  PackedValidation(const ExampleTable& table, const std::vector<uint32_t>& ids, int64_t seq_len,
                   int64_t batch_size, int64_t max_rows = INT64_MAX);

  int64_t num_rows() const { return std::min(plan_.num_rows(), max_rows_); }
  int64_t num_batches() const { return (num_rows() + batch_size_ - 1) / batch_size_; }
  // Fills `out` with the next batch; false once exhausted (then call reset()).
  bool next(PackedBatch& out);
  void reset() { pos_ = 0; }

 private:
  const ExampleTable* table_;
  int64_t seq_len_, batch_size_, max_rows_;
  RowPlan plan_;
  int64_t pos_ = 0;
};

}  // namespace mt
