// Plain text -> tokens (byte tokenizer unless one is given) -> train/validation splits -> batches of next-token prediction.
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer.h"

namespace mt {

// The built-in demo text (original English prose, about 10 KB), used when data.path is empty.
std::string_view builtin_text();

// One micro-batch: `inputs` and `targets` are [batch_size, seq_len] row-major token ids, and
// targets[b][t] = inputs[b][t + 1] within the same window of seq_len + 1 tokens.
struct Batch {
  std::vector<int32_t> inputs, targets;
  int64_t batch_size = 0, seq_len = 0;
};

// Everything needed to reproduce the sampler's future batches (saved in checkpoints). Counted in
// rows (sequences), not batches, so that a run resumed with another micro-batch size (more
// gradient accumulation on fewer devices, say) continues with the same sequences.
struct SamplerState {
  uint64_t seed = 0;
  int64_t rows_drawn = 0;
  // Packed examples (data/packed_sampler.h): the epoch and the row within it where the next batch
  // starts, so that a restore plans that one epoch instead of replaying every epoch before it;
  // -1: not known (plain text, whose rows need no position, or a checkpoint written before these
  // were saved).
  int64_t epoch = -1, row = -1;
};

class TextDataset {
 public:
  // Loads the plain-text file at `path` (empty: the built-in demo text), tokenises it with
  // `tokenizer` (null: the byte tokenizer; no BOS/EOS is added; the dataset does not keep the
  // pointer) and splits it: the last floor(n * val_fraction) tokens are the validation
  // split, the rest the training split. Throws mt::Error naming the file when it is missing,
  // unreadable or empty, and when a split is shorter than seq_len + 1 tokens (a validation split
  // is only required when val_fraction > 0).
  TextDataset(const std::string& path, double val_fraction, int64_t seq_len,
              const Tokenizer* tokenizer = nullptr);
  // Same, from text in memory; `name` is used in error messages.
  static TextDataset from_text(std::string_view text, double val_fraction, int64_t seq_len,
                               const std::string& name = "<text>",
                               const Tokenizer* tokenizer = nullptr);
  // Same, from tokens already encoded (the documents of {"text"} records, joined); `name` is
  // used in error messages.
  static TextDataset from_tokens(std::vector<int32_t> tokens, double val_fraction, int64_t seq_len,
                                 const std::string& name);

  const std::vector<int32_t>& train_tokens() const { return train_; }
  const std::vector<int32_t>& val_tokens() const { return val_; }
  int64_t seq_len() const { return seq_len_; }
  const std::string& name() const { return name_; }  // the file path, or "<built-in text>"

 private:
  TextDataset() = default;
  void init(std::string_view text, double val_fraction, int64_t seq_len, const Tokenizer* tokenizer);
  void split(std::vector<int32_t> tokens, double val_fraction, int64_t seq_len);

  std::vector<int32_t> train_, val_;
  int64_t seq_len_ = 0;
  std::string name_;
};

// Random windows of seq_len + 1 tokens from the training split. Row r of the stream (counting rows
// over all batches drawn) depends only on (seed, r), so the stream is the same on every platform,
// a restored sampler continues exactly where the saved one stopped, and cutting the stream into
// batches of 16, or 8 + 8, or 4 + 4 + 4 + 4 gives the same rows: the batch size and gradient
// accumulation of a step do not change which sequences it sees. Keeps a reference to the dataset.
class BatchSampler {
 public:
  BatchSampler(const TextDataset& data, int64_t batch_size, uint64_t seed);

  Batch next();
  SamplerState state() const { return {seed_, rows_drawn_}; }
  void restore(const SamplerState& s);

  int64_t batch_size() const { return batch_size_; }

 private:
  const TextDataset* data_;
  int64_t batch_size_;
  uint64_t seed_;
  int64_t rows_drawn_ = 0;
};

// The validation split cut into consecutive non-overlapping windows (window i: inputs are tokens
// [i*seq_len, (i+1)*seq_len), targets the same shifted by one), grouped into batches of up to
// batch_size windows; the last batch may be smaller; only the first max_windows windows when
// there are more (a fixed budget, whatever the batch size). Fixed, so evaluations are comparable.
class ValidationBatches {
 public:
  ValidationBatches(const TextDataset& data, int64_t batch_size, int64_t max_windows = INT64_MAX);

  int64_t num_windows() const { return num_windows_; }
  int64_t num_batches() const { return (num_windows_ + batch_size_ - 1) / batch_size_; }
  // Fills `out` with the next batch; false once the split is exhausted (then call reset()).
  bool next(Batch& out);
  void reset() { pos_ = 0; }

 private:
  const TextDataset* data_;
  int64_t batch_size_;
  int64_t num_windows_;
  int64_t pos_ = 0;  // next window
};

}  // namespace mt
