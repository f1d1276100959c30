// Preference pairs as a training run reads them (train.method dpo, ipo, simpo, orpo): the pairs of
// a preference file (data/preference_pairs.h) split by pair into train and validation, one
// sequence a row: pair p's chosen at an even row of the batch, its rejected in the row after, so a
// micro-batch always holds whole pairs (a data-parallel share of it may hold half of one: the
// step's loss comes from every rank's sums, train/preference_step.h). The train pairs are shuffled
// each epoch (seed + epoch, as the packed examples), the stream of rows does not depend on how it
// is cut into batches, and a checkpoint's sampler state (epoch, row) restores it exactly.
//
// With [[data.sources]] the pairs come from several files, each read with its own format,
// columns and split, and drawn pair by pair in the fixed order of data/source_mix.h by weight;
// each source splits and shuffles its pairs with a seed of its own (source_seed) and repeats its
// epochs as often as its share asks, and the state is the one count of rows drawn, as an SFT mix's
// (train/mixed_data.h). Each source's held-out pairs join the validation set, its share of the
// budget (the sources one after another).
#pragma once
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "data/example_table.h"
#include "data/preference_pairs.h"
#include "data/source_mix.h"
#include "train/training_data.h"

namespace mt {

class PreferenceData final : public TrainingData {
 public:
  PreferenceData(const RunConfig& cfg, const Tokenizer& tok, std::ostream& log);

  PackedBatch next() override;
  SamplerState state() const override;
  void restore(const SamplerState& s) override;
  bool has_validation() const override;
  bool next_validation(PackedBatch& out) override;
  void reset_validation() override { val_pos_ = 0; }
  int64_t num_validation_rows() const override;
  std::string describe() const override;
  int64_t rows_per_epoch() const override;
  std::string prompt_template() const override;

  // The sequences of the last batch next() or next_validation() gave, a row each: 2 p (pair p's
  // chosen, p its index in the file, or among the sources' pairs of a mix, their splits' pairs one
  // source after another) or 2 p + 1 (its rejected).
  const std::vector<int64_t>& last_sequences() const { return last_; }
  // Sequences of the file or the mix (2 x its pairs): the ids above are below this.
  int64_t sequences() const { return int64_t(table_.size()); }
  // Every sequence of the train and validation pairs in batches of `batch_rows` rows (the last may
  // be smaller), in file order: what a pass computing each pair's reference log-probabilities reads.
  // Fills `out` and returns true until all were given.
  bool next_of_all(PackedBatch& out, int64_t batch_rows);

 private:
  // One file of pairs, or one source of a mix: its pairs' indices in the table (global).
  struct Part {
    std::string path, split;  // split: "train" when the whole file
    DataFormat format = DataFormat::kAuto;
    int64_t skipped = 0, truncated = 0;
    std::vector<uint32_t> train, val;
    uint64_t seed = 0;
    // Sampling: the next pair starts at row `row` (even) of epoch `epoch`, whose pair order is order.
    int64_t epoch = 0, row = 0;
    std::vector<uint32_t> order;
    std::string describe(int64_t seq_len) const;
  };
  PackedBatch batch_of(const std::vector<int64_t>& sequences);
  // Part `i`'s next train row's sequence; advances it.
  int64_t next_row(Part& part);

  std::vector<Part> parts_;
  std::unique_ptr<MixSchedule> mix_;  // with [[data.sources]]: which part gives each pair
  ExampleTable table_;
  std::vector<int64_t> val_rows_;  // the validation pass's sequences, in order
  int64_t seq_len_, batch_size_;
  uint64_t seed_;
  int64_t rows_drawn_ = 0;
  size_t current_ = 0;     // the part whose pair the last row began
  int64_t val_pos_ = 0;  // rows of the validation pass given
  int64_t all_pos_ = 0;  // sequences next_of_all gave
  std::vector<int64_t> last_;
};

}  // namespace mt
