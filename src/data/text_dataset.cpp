#include "data/text_dataset.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/checked_math.h"
#include "core/error.h"
#include "core/regular_file.h"
#include "data/byte_tokenizer.h"
#include "data/shuffle.h"

namespace mt {
namespace {

std::string read_text_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail("data file '" + path + "' does not exist");
  if (std::filesystem::is_directory(path, ec))
    fail("data file '" + path + "' is a directory, expected a plain-text file");
  require_regular_file(path, "data file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open data file '" + path + "': " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail("cannot read data file '" + path + "'");
  std::string text = ss.str();
  if (text.empty()) fail("data file '" + path + "' is empty");
  return text;
}

void fill_window(Batch& b, int64_t row, const std::vector<int32_t>& tokens, int64_t start) {
  const int64_t L = b.seq_len;
  for (int64_t t = 0; t < L; ++t) {
    b.inputs[size_t(row * L + t)] = tokens[size_t(start + t)];
    b.targets[size_t(row * L + t)] = tokens[size_t(start + t + 1)];
  }
}

Batch make_batch(int64_t batch_size, int64_t seq_len) {
  Batch b;
  b.batch_size = batch_size;
  b.seq_len = seq_len;
  const int64_t n = mul_or_fail(batch_size, seq_len, "a batch's tokens (batch_size x seq_len)");
  b.inputs.resize(size_t(n));
  b.targets.resize(size_t(n));
  return b;
}

}  // namespace

TextDataset::TextDataset(const std::string& path, double val_fraction, int64_t seq_len,
                         const Tokenizer* tokenizer) {
  if (path.empty()) {
    name_ = "<built-in text>";
    init(builtin_text(), val_fraction, seq_len, tokenizer);
  } else {
    name_ = path;
    init(read_text_file(path), val_fraction, seq_len, tokenizer);
  }
}

TextDataset TextDataset::from_text(std::string_view text, double val_fraction, int64_t seq_len,
                                   const std::string& name, const Tokenizer* tokenizer) {
  TextDataset d;
  d.name_ = name;
  if (text.empty()) fail("data '" + name + "' is empty");
  d.init(text, val_fraction, seq_len, tokenizer);
  return d;
}

TextDataset TextDataset::from_tokens(std::vector<int32_t> tokens, double val_fraction, int64_t seq_len,
                                     const std::string& name) {
  TextDataset d;
  d.name_ = name;
  d.split(std::move(tokens), val_fraction, seq_len);
  return d;
}

void TextDataset::init(std::string_view text, double val_fraction, int64_t seq_len,
                       const Tokenizer* tokenizer) {
  split(tokenizer ? tokenizer->encode(text) : ByteTokenizer().encode(text), val_fraction, seq_len);
}

void TextDataset::split(std::vector<int32_t> tokens, double val_fraction, int64_t seq_len) {
  if (seq_len <= 0) fail("data '" + name_ + "': seq_len must be > 0, got " + std::to_string(seq_len));
  if (!(val_fraction >= 0.0 && val_fraction < 1.0))
    fail("data '" + name_ + "': data.val_fraction must be in [0, 1), got " +
         std::to_string(val_fraction));
  seq_len_ = seq_len;
  const int64_t n = int64_t(tokens.size());
  const int64_t n_val = int64_t(std::floor(double(n) * val_fraction));
  const int64_t n_train = n - n_val;
  const int64_t need = seq_len + 1;
  if (n_train < need)
    fail("data '" + name_ + "': the training split has " + std::to_string(n_train) +
         " tokens, needs at least train.seq_len + 1 = " + std::to_string(need) +
         " (use a longer text or a smaller train.seq_len)");
  if (val_fraction > 0.0 && n_val < need)
    fail("data '" + name_ + "': the validation split has " + std::to_string(n_val) +
         " tokens, needs at least train.seq_len + 1 = " + std::to_string(need) +
         " (raise data.val_fraction, set it to 0, or lower train.seq_len)");
  train_.assign(tokens.begin(), tokens.begin() + n_train);
  val_.assign(tokens.begin() + n_train, tokens.end());
}

BatchSampler::BatchSampler(const TextDataset& data, int64_t batch_size, uint64_t seed)
    : data_(&data), batch_size_(batch_size), seed_(seed) {
  if (batch_size <= 0) fail("batch sampler: batch_size must be > 0, got " + std::to_string(batch_size));
}

Batch BatchSampler::next() {
  const auto& tokens = data_->train_tokens();
  const int64_t L = data_->seq_len();
  const uint64_t starts = uint64_t(int64_t(tokens.size()) - L);  // windows of L + 1 tokens
  Batch b = make_batch(batch_size_, L);
  for (int64_t row = 0; row < batch_size_; ++row) {
    std::mt19937_64 rng(splitmix64(seed_ ^ splitmix64(uint64_t(rows_drawn_++))));
    fill_window(b, row, tokens, int64_t(uniform_below(rng, starts)));
  }
  return b;
}

void BatchSampler::restore(const SamplerState& s) {
  if (s.rows_drawn < 0)
    fail("batch sampler: cannot restore a negative row count " + std::to_string(s.rows_drawn));
  seed_ = s.seed;
  rows_drawn_ = s.rows_drawn;
}

ValidationBatches::ValidationBatches(const TextDataset& data, int64_t batch_size, int64_t max_windows)
    : data_(&data), batch_size_(batch_size) {
  if (batch_size <= 0)
    fail("validation batches: batch_size must be > 0, got " + std::to_string(batch_size));
  if (max_windows <= 0)
    fail("validation batches: max_windows must be > 0, got " + std::to_string(max_windows));
  const int64_t n = int64_t(data.val_tokens().size());
  num_windows_ = std::min(n > 0 ? (n - 1) / data.seq_len() : 0, max_windows);
}

bool ValidationBatches::next(Batch& out) {
  if (pos_ >= num_windows_) return false;
  const int64_t L = data_->seq_len();
  const int64_t rows = std::min(batch_size_, num_windows_ - pos_);
  out = make_batch(rows, L);
  for (int64_t row = 0; row < rows; ++row) fill_window(out, row, data_->val_tokens(), (pos_ + row) * L);
  pos_ += rows;
  return true;
}

}  // namespace mt
