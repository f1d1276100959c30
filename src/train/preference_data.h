// Preference pairs as a training run reads them (train.method dpo, ipo, simpo, orpo): the pairs of
// a preference file (data/preference_pairs.h) split by pair into train and validation, one
// sequence a row: pair p's chosen at an even row of the batch, its rejected in the row after, so a
// micro-batch always holds whole pairs (a data-parallel share of it may hold half of one: the
// step's loss comes from every rank's sums, train/preference_step.h). The train pairs are shuffled each epoch (seed + epoch, as the packed
// examples), the stream of rows does not depend on how it is cut into batches, and a checkpoint's
// sampler state (epoch, row) restores it exactly.
#pragma once
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "data/example_table.h"
#include "data/preference_pairs.h"
#include "train/training_data.h"

namespace mt {

class PreferenceData final : public TrainingData {
 public:
  PreferenceData(const RunConfig& cfg, const Tokenizer& tok, std::ostream& log);

  PackedBatch next() override;
  SamplerState state() const override;
  void restore(const SamplerState& s) override;
  bool has_validation() const override { return !val_.empty(); }
  bool next_validation(PackedBatch& out) override;
  void reset_validation() override { val_pos_ = 0; }
  int64_t num_validation_rows() const override;
  std::string describe() const override;
  int64_t rows_per_epoch() const override { return 2 * int64_t(train_.size()); }
  std::string prompt_template() const override;

  // The sequences of the last batch next() or next_validation() gave, a row each: 2 p (pair p's
  // chosen, p its index in the file) or 2 p + 1 (its rejected).
  const std::vector<int64_t>& last_sequences() const { return last_; }
  // Sequences of the file (2 x its pairs): the ids above are below this.
  int64_t sequences() const { return int64_t(table_.size()); }
  // Every sequence of the train and validation pairs in batches of `batch_rows` rows (the last may
  // be smaller), in file order: what a pass computing each pair's reference log-probabilities reads.
  // Fills `out` and returns true until all were given.
  bool next_of_all(PackedBatch& out, int64_t batch_rows);

 private:
  PackedBatch batch_of(const std::vector<int64_t>& sequences);

  PreferenceSet set_;
  ExampleTable table_;
  std::vector<uint32_t> train_, val_;  // pair indices
  int64_t seq_len_, batch_size_, max_val_rows_;
  uint64_t seed_;
  std::string path_;
  // Sampling: the next batch starts at row `row_` (even) of epoch `epoch_`, whose pair order is order_.
  int64_t epoch_ = 0, row_ = 0, rows_drawn_ = 0;
  std::vector<uint32_t> order_;
  int64_t val_pos_ = 0;  // rows of the validation pass given
  int64_t all_pos_ = 0;  // sequences next_of_all gave
  std::vector<int64_t> last_;
};

}  // namespace mt
