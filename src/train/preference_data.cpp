#include "train/preference_data.h"

#include <algorithm>

#include "core/error.h"
#include "data/packing.h"
#include "data/shuffle.h"
#include "train/sequence_length.h"

namespace mt {

namespace {

PreferenceSet read_pairs(const RunConfig& cfg, const Tokenizer& tok) {
  PreferenceOptions opt;
  opt.format = cfg.data.format == "auto" || cfg.data.format == "text" ? DataFormat::kAuto : parse_format(cfg.data.format);
  opt.max_length = cfg.train.seq_len;
  opt.max_prompt_length = cfg.preference.max_prompt_length;
  opt.truncation = parse_truncation_mode(cfg.preference.truncation_mode);
  opt.quiet = true;  // the constructor logs the warning, on rank 0 only
  opt.columns = cfg.data.columns;
  return read_preference_pairs(cfg.data.path, tok, opt);
}

}  // namespace

PreferenceData::PreferenceData(const RunConfig& cfg, const Tokenizer& tok, std::ostream& log)
    : set_(read_pairs(cfg, tok)),
      table_(set_.sequences),
      seq_len_(cfg.train.seq_len),
      batch_size_(cfg.train.batch_size),
      max_val_rows_((validation_rows(cfg.train) + 1) / 2 * 2),
      seed_(cfg.train.seed),
      path_(cfg.data.path) {
  if (set_.pairs() == 0) fail("data file '" + path_ + "': no preference pair to train on");
  ExampleSplit split = split_examples(set_.pairs(), cfg.data.val_fraction, cfg.train.seed);
  train_ = std::move(split.train), val_ = std::move(split.val);
  if (!set_.warning.empty()) log << set_.warning << "\n";
  order_ = shuffled_order(uint32_t(train_.size()), seed_);
}

PackedBatch PreferenceData::batch_of(const std::vector<int64_t>& sequences) {
  PackedBatch b = make_packed_batch(int64_t(sequences.size()), seq_len_);
  for (size_t r = 0; r < sequences.size(); ++r) {
    const uint32_t id = uint32_t(sequences[r]);
    fill_row(b, int64_t(r), table_, std::span<const uint32_t>(&id, 1));
  }
  last_ = sequences;
  return b;
}

PackedBatch PreferenceData::next() {
  std::vector<int64_t> seqs;
  const int64_t rows = 2 * int64_t(train_.size());
  while (int64_t(seqs.size()) < batch_size_) {
    if (row_ == rows) {  // the next epoch, in its own order
      ++epoch_, row_ = 0;
      order_ = shuffled_order(uint32_t(train_.size()), seed_ + uint64_t(epoch_));
    }
    const int64_t pair = train_[order_[size_t(row_ / 2)]];
    seqs.push_back(2 * pair + row_ % 2);
    ++row_, ++rows_drawn_;
  }
  return batch_of(seqs);
}

SamplerState PreferenceData::state() const { return {seed_, rows_drawn_, epoch_, row_}; }

void PreferenceData::restore(const SamplerState& s) {
  const int64_t rows = 2 * int64_t(train_.size());
  if (s.rows_drawn < 0) fail("sampler state: negative rows drawn");
  int64_t epoch = s.epoch, row = s.row;
  if (epoch < 0) epoch = s.rows_drawn / rows, row = s.rows_drawn % rows;
  if (row < 0 || row > rows || row % 2 != 0)
    fail("sampler state: row " + std::to_string(row) + " is not the start of a pair of the epoch's " +
         std::to_string(rows) + " rows");
  epoch_ = epoch, row_ = row, rows_drawn_ = s.rows_drawn;
  order_ = shuffled_order(uint32_t(train_.size()), seed_ + uint64_t(epoch_));
}

int64_t PreferenceData::num_validation_rows() const {
  return std::min<int64_t>(2 * int64_t(val_.size()), max_val_rows_);
}

bool PreferenceData::next_validation(PackedBatch& out) {
  const int64_t total = num_validation_rows();
  if (val_pos_ >= total) return false;
  std::vector<int64_t> seqs;
  for (; val_pos_ < total && int64_t(seqs.size()) < batch_size_; ++val_pos_)
    seqs.push_back(2 * int64_t(val_[size_t(val_pos_ / 2)]) + val_pos_ % 2);
  out = batch_of(seqs);
  return true;
}

bool PreferenceData::next_of_all(PackedBatch& out, int64_t batch_rows) {
  const int64_t total = sequences();
  if (all_pos_ >= total) {
    all_pos_ = 0;
    return false;
  }
  std::vector<int64_t> seqs;
  for (; all_pos_ < total && int64_t(seqs.size()) < batch_rows; ++all_pos_) seqs.push_back(all_pos_);
  out = batch_of(seqs);
  return true;
}

std::string PreferenceData::describe() const {
  return path_ + " (preference pairs" +
         (set_.format == DataFormat::kAuto ? std::string(", plain text") : ", " + std::string(format_name(set_.format))) +
         ": " + std::to_string(train_.size()) + " train / " + std::to_string(val_.size()) + " validation, " +
         std::to_string(set_.skipped) + " skipped, " + std::to_string(set_.truncated) + " truncated to " +
         std::to_string(seq_len_) + " tokens)";
}

std::string PreferenceData::prompt_template() const {
  return set_.format == DataFormat::kAuto ? "none" : std::string(format_name(set_.format));
}

}  // namespace mt
