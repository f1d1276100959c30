#include "train/preference_data.h"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <sstream>

#include "core/error.h"
#include "data/packing.h"
#include "data/shuffle.h"
#include "train/mixed_data.h"
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

std::string pair_share_text(double share) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * share);
  return buf;
}

// A resumed mix replays its schedule over the pairs drawn: bounded, as a hostile count would
// otherwise never finish (as train/mixed_data.cpp's).
constexpr int64_t kMaxMixedPairs = int64_t(1) << 36;

}  // namespace

PreferenceData::PreferenceData(const RunConfig& cfg, const Tokenizer& tok, std::ostream& log)
    : seq_len_(cfg.train.seq_len), batch_size_(cfg.train.batch_size), seed_(cfg.train.seed) {
  const std::vector<DataSource>& sources = cfg.data.sources;
  if (!sources.empty() && !cfg.data.path.empty())
    fail("data.path ('" + cfg.data.path + "') and [[data.sources]] both name the training data: give one "
         "(a single file is data.path, or one [[data.sources]] table)");
  std::vector<Example> all;  // the table's sequences: each part's pairs in file order, part after part
  // The pairs of `one` (a file as data.path names it) in `range`, as the next part.
  const auto add_part = [&](const RunConfig& one, const SplitRange& range) {
    PreferenceSet set = read_pairs(one, tok);
    if (set.pairs() == 0) fail("data file '" + one.data.path + "': no preference pair to train on");
    if (const std::string why = range.misfit(set.pairs(), "preference pairs"); !why.empty())
      fail("data file '" + one.data.path + "': " + why);
    const size_t first = range.first(set.pairs()), last = range.last(set.pairs());
    Part p;
    p.path = one.data.path, p.split = range.text, p.format = set.format;
    p.skipped = set.skipped, p.truncated = set.truncated;
    p.seed = one.train.seed;
    const uint32_t base = uint32_t(all.size() / 2);
    ExampleSplit split = split_examples(last - first, one.data.val_fraction, p.seed);
    for (auto* ids : {&split.train, &split.val})
      for (uint32_t& id : *ids) id += base;
    p.train = std::move(split.train), p.val = std::move(split.val);
    if (p.train.empty()) fail("data file '" + one.data.path + "': no preference pair left to train on");
    p.order = shuffled_order(uint32_t(p.train.size()), p.seed);
    const int64_t val_rows = std::min<int64_t>(2 * int64_t(p.val.size()), (validation_rows(one.train) + 1) / 2 * 2);
    for (int64_t r = 0; r < val_rows; ++r) val_rows_.push_back(2 * int64_t(p.val[size_t(r / 2)]) + r % 2);
    all.insert(all.end(), std::make_move_iterator(set.sequences.begin() + std::ptrdiff_t(2 * first)),
               std::make_move_iterator(set.sequences.begin() + std::ptrdiff_t(2 * last)));
    if (!set.warning.empty()) log << set.warning << "\n";
    parts_.push_back(std::move(p));
  };
  if (sources.empty()) {
    add_part(cfg, SplitRange{});
  } else {
    std::vector<double> weights;
    for (const DataSource& s : sources) weights.push_back(double(s.weight));
    mix_ = std::make_unique<MixSchedule>(weights);
    // Written once every source opened: a source refused is then the run's one line.
    std::ostringstream lines;
    lines << "data: " << sources.size() << (sources.size() == 1 ? " source" : " sources")
          << " of preference pairs mixed by weight (shares of the training pairs):\n";
    for (size_t i = 0; i < sources.size(); ++i) {
      try {
        add_part(source_config(cfg, i, mix_->share(i)), *parse_split(sources[i].split));
      } catch (const Error& e) {  // which source the file's own message is about
        fail("data.sources: source " + std::to_string(i + 1) + ": " + e.what());
      }
      const Part& p = parts_.back();
      lines << "  source " << i + 1 << ": weight " << sources[i].weight << ", " << pair_share_text(mix_->share(i))
            << " of the pairs, " << p.train.size() << " pairs per pass: " << p.describe(seq_len_) << "\n";
    }
    log << lines.str();
  }
  if (all.size() / 2 > size_t(UINT32_MAX)) fail("preference data: more than 2^32 pairs");
  table_ = ExampleTable(all);
}

std::string PreferenceData::Part::describe(int64_t seq_len) const {
  return path + " (preference pairs" +
         (format == DataFormat::kAuto ? std::string(", plain text") : ", " + std::string(format_name(format))) + ": " +
         std::to_string(train.size()) + " train / " + std::to_string(val.size()) + " validation, " +
         std::to_string(skipped) + " skipped, " + std::to_string(truncated) + " truncated to " +
         std::to_string(seq_len) + " tokens)" + (split == "train" ? "" : ", split " + split);
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

int64_t PreferenceData::next_row(Part& part) {
  if (part.row == 2 * int64_t(part.train.size())) {  // the next epoch, in its own order
    ++part.epoch, part.row = 0;
    part.order = shuffled_order(uint32_t(part.train.size()), part.seed + uint64_t(part.epoch));
  }
  const int64_t pair = part.train[part.order[size_t(part.row / 2)]];
  return 2 * pair + part.row++ % 2;
}

PackedBatch PreferenceData::next() {
  std::vector<int64_t> seqs;
  while (int64_t(seqs.size()) < batch_size_) {
    if (rows_drawn_ % 2 == 0) current_ = mix_ ? mix_->next() : 0;  // a pair's rows from one part
    seqs.push_back(next_row(parts_[current_]));
    ++rows_drawn_;
  }
  return batch_of(seqs);
}

SamplerState PreferenceData::state() const {
  if (mix_) return {seed_, rows_drawn_, -1, -1};  // the schedule tells each source's place
  return {seed_, rows_drawn_, parts_[0].epoch, parts_[0].row};
}

void PreferenceData::restore(const SamplerState& s) {
  if (s.rows_drawn < 0) fail("sampler state: negative rows drawn");
  if (mix_) {
    if (s.rows_drawn % 2 != 0)
      fail("sampler state: " + std::to_string(s.rows_drawn) + " rows drawn is not a whole number of pairs");
    if (s.rows_drawn / 2 > kMaxMixedPairs)
      fail("preference data: cannot restore " + std::to_string(s.rows_drawn) + " rows drawn (more than 2^37)");
    mix_->seek(s.rows_drawn / 2);
    for (size_t i = 0; i < parts_.size(); ++i) {
      Part& p = parts_[i];
      const int64_t pairs = int64_t(p.train.size()), drawn = mix_->counts()[i];
      p.epoch = drawn / pairs, p.row = 2 * (drawn % pairs);
      p.order = shuffled_order(uint32_t(pairs), p.seed + uint64_t(p.epoch));
    }
    rows_drawn_ = s.rows_drawn;
    return;
  }
  Part& p = parts_[0];
  const int64_t rows = 2 * int64_t(p.train.size());
  int64_t epoch = s.epoch, row = s.row;
  if (epoch < 0) epoch = s.rows_drawn / rows, row = s.rows_drawn % rows;
  if (row < 0 || row > rows || row % 2 != 0)
    fail("sampler state: row " + std::to_string(row) + " is not the start of a pair of the epoch's " +
         std::to_string(rows) + " rows");
  p.epoch = epoch, p.row = row, rows_drawn_ = s.rows_drawn;
  p.order = shuffled_order(uint32_t(p.train.size()), p.seed + uint64_t(p.epoch));
}

bool PreferenceData::has_validation() const {
  for (const Part& p : parts_)
    if (!p.val.empty()) return true;
  return false;
}

int64_t PreferenceData::num_validation_rows() const { return int64_t(val_rows_.size()); }

bool PreferenceData::next_validation(PackedBatch& out) {
  const int64_t total = num_validation_rows();
  if (val_pos_ >= total) return false;
  std::vector<int64_t> seqs;
  for (; val_pos_ < total && int64_t(seqs.size()) < batch_size_; ++val_pos_)
    seqs.push_back(val_rows_[size_t(val_pos_)]);
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

int64_t PreferenceData::rows_per_epoch() const {
  int64_t rows = 0;
  for (const Part& p : parts_) rows += 2 * int64_t(p.train.size());
  return rows;
}

std::string PreferenceData::describe() const {
  if (!mix_) return parts_[0].describe(seq_len_);
  // Each source's own description is its line above the run's header (the constructor's log).
  std::string out = std::to_string(parts_.size()) + (parts_.size() == 1 ? " source" : " sources") +
                    " of preference pairs mixed by weight (";
  for (size_t i = 0; i < parts_.size(); ++i)
    out += (i ? ", " : "") + pair_share_text(mix_->share(i)) + " " + parts_[i].path;
  return out + ")";
}

// generate's --template: the first part's that has one.
std::string PreferenceData::prompt_template() const {
  for (const Part& p : parts_)
    if (p.format != DataFormat::kAuto) return std::string(format_name(p.format));
  return "none";
}

}  // namespace mt
