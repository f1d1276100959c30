#include "train/mixed_data.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/error.h"
#include "data/source_mix.h"

namespace mt {

namespace {

// Rows from several sources as one batch. Packed examples carry positions, segments and padding,
// windows of text none: in a batch that mixes them a text row gets what its null fields mean
// (positions 0, 1, ..., one segment, no padding).
PackedBatch join_source_rows(const std::vector<PackedBatch>& rows) {
  PackedBatch out;
  out.seq_len = rows.front().seq_len;
  bool positions = false, padding = false;
  for (const PackedBatch& r : rows) {
    positions = positions || !r.positions.empty();
    padding = padding || !r.padding.empty();
  }
  for (const PackedBatch& r : rows) {
    if (r.seq_len != out.seq_len) fail("mixed data: sources gave rows of different lengths");
    out.batch_size += r.batch_size;
    out.tokens.insert(out.tokens.end(), r.tokens.begin(), r.tokens.end());
    out.targets.insert(out.targets.end(), r.targets.begin(), r.targets.end());
    const size_t n = r.tokens.size();
    if (positions) {
      if (!r.positions.empty()) {
        out.positions.insert(out.positions.end(), r.positions.begin(), r.positions.end());
        out.segments.insert(out.segments.end(), r.segments.begin(), r.segments.end());
      } else {
        for (size_t t = 0; t < n; ++t) out.positions.push_back(int32_t(int64_t(t) % r.seq_len));
        out.segments.insert(out.segments.end(), n, 0);
      }
    }
    if (padding) {
      if (!r.padding.empty()) out.padding.insert(out.padding.end(), r.padding.begin(), r.padding.end());
      else out.padding.insert(out.padding.end(), n, 0);
    }
  }
  return out;
}

std::string source_count(size_t n) { return std::to_string(n) + (n == 1 ? " source" : " sources"); }

std::string percent(double share) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * share);
  return buf;
}

class MixedData : public TrainingData {
 public:
  MixedData(const RunConfig& cfg, std::vector<std::unique_ptr<TrainingData>> parts, MixSchedule schedule)
      : parts_(std::move(parts)),
        schedule_(std::move(schedule)),
        batch_size_(cfg.train.batch_size),
        seed_(cfg.train.seed),
        sources_(cfg.data.sources) {}

  PackedBatch next() override {
    std::vector<PackedBatch> rows;
    for (int64_t r = 0; r < batch_size_; ++r) rows.push_back(parts_[schedule_.next()]->next());
    return join_source_rows(rows);
  }
  SamplerState state() const override { return {seed_, schedule_.rows(), -1, -1}; }
  void restore(const SamplerState& s) override {
    // The replay of the schedule is a pass over the rows drawn: bounded, as a hostile count would
    // otherwise never finish.
    if (s.rows_drawn > kMaxRows)
      fail("mixed data: cannot restore " + std::to_string(s.rows_drawn) + " rows drawn (more than 2^36)");
    schedule_.seek(s.rows_drawn);
    for (size_t i = 0; i < parts_.size(); ++i)
      parts_[i]->restore({source_seed(s.seed, i), schedule_.counts()[i], -1, -1});
    seed_ = s.seed;
  }
  bool has_validation() const override {
    for (const auto& p : parts_)
      if (p->has_validation()) return true;
    return false;
  }
  // The sources' held-out rows one after another, in the order the sources are listed.
  bool next_validation(PackedBatch& out) override {
    std::vector<PackedBatch> rows;
    while (int64_t(rows.size()) < batch_size_ && val_part_ < parts_.size()) {
      PackedBatch b;
      if (parts_[val_part_]->has_validation() && parts_[val_part_]->next_validation(b)) rows.push_back(std::move(b));
      else ++val_part_;
    }
    if (rows.empty()) return false;
    out = join_source_rows(rows);
    return true;
  }
  void reset_validation() override {
    for (auto& p : parts_)
      if (p->has_validation()) p->reset_validation();
    val_part_ = 0;
  }
  int64_t num_validation_rows() const override {
    int64_t n = 0;
    for (const auto& p : parts_)
      if (p->has_validation()) n += p->num_validation_rows();
    return n;
  }
  std::string describe() const override {
    // Each source's own description is its line above the run's header (open_mixed_data).
    std::string out = source_count(parts_.size()) + " mixed by weight (";
    for (size_t i = 0; i < parts_.size(); ++i)
      out += (i ? ", " : "") + percent(schedule_.share(i)) + " " + sources_[i].path;
    return out + ")";
  }
  // An epoch of the mixture is as many rows as its sources' epochs together.
  int64_t rows_per_epoch() const override {
    int64_t n = 0;
    for (const auto& p : parts_) n += p->rows_per_epoch();
    return n;
  }
  // generate's --template: the first source's that has one.
  std::string prompt_template() const override {
    for (const auto& p : parts_)
      if (const std::string t = p->prompt_template(); t != "none") return t;
    return "none";
  }

 private:
  static constexpr int64_t kMaxRows = int64_t(1) << 36;
  std::vector<std::unique_ptr<TrainingData>> parts_;
  MixSchedule schedule_;
  int64_t batch_size_;
  uint64_t seed_;
  std::vector<DataSource> sources_;
  size_t val_part_ = 0;
};

std::vector<double> source_weights(const RunConfig& cfg) {
  std::vector<double> w;
  for (const DataSource& s : cfg.data.sources) w.push_back(double(s.weight));
  return w;
}

}  // namespace

uint64_t source_seed(uint64_t seed, size_t i) {
  // splitmix64 of (seed, place): a change of either reshuffles the source.
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (uint64_t(i) + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

RunConfig source_config(const RunConfig& cfg, size_t i, double share) {
  const DataSource& s = cfg.data.sources[i];
  RunConfig one = cfg;
  one.data.sources.clear();
  one.data.path = s.path;
  one.data.format = s.format;
  if (!s.columns.empty()) one.data.columns = s.columns;
  one.train.batch_size = 1;
  one.train.seed = source_seed(cfg.train.seed, i);
  if (cfg.train.seq_len > 0) {  // 0 while the length is still being chosen (train/sequence_length.h)
    const int64_t rows = std::max<int64_t>(1, int64_t(std::ceil(double(validation_rows(cfg.train)) * share)));
    one.train.eval_tokens = rows * cfg.train.seq_len;
  }
  return one;
}

std::unique_ptr<TrainingData> open_mixed_data(const RunConfig& cfg, std::ostream& log, const OpenOneSource& open_one) {
  if (!cfg.data.path.empty())
    fail("data.path ('" + cfg.data.path + "') and [[data.sources]] both name the training data: give one "
         "(a single file is data.path, or one [[data.sources]] table)");
  MixSchedule schedule(source_weights(cfg));
  std::vector<std::unique_ptr<TrainingData>> parts;
  // Written once every source opened: a source refused is then the run's one line.
  std::ostringstream lines;
  lines << "data: " << source_count(cfg.data.sources.size()) << " mixed by weight (shares of the training rows):\n";
  for (size_t i = 0; i < cfg.data.sources.size(); ++i) {
    const DataSource& s = cfg.data.sources[i];
    try {
      parts.push_back(open_one(source_config(cfg, i, schedule.share(i)), *parse_split(s.split)));
    } catch (const Error& e) {  // which source the file's own message is about
      fail("data.sources: source " + std::to_string(i + 1) + ": " + e.what());
    }
    lines << "  source " << i + 1 << ": weight " << s.weight << ", " << percent(schedule.share(i)) << " of the rows, "
          << parts.back()->rows_per_epoch() << " rows per pass: " << parts.back()->describe()
          << (s.split == "train" ? "" : ", split " + s.split) << "\n";
  }
  log << lines.str();
  return std::make_unique<MixedData>(cfg, std::move(parts), std::move(schedule));
}

}  // namespace mt
