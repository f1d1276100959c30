#include "train/training_data.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "data/byte_tokenizer.h"
#include "data/chat_jinja.h"
#include "data/chat_templates.h"
#include "data/examples.h"
#include "data/packed_sampler.h"
#include "train/added_vocab.h"
#include "train/mixed_data.h"
#include "train/preference_data.h"
#include "data/token_cache.h"
#include "train/sequence_length.h"

namespace mt {

namespace {

namespace fs = std::filesystem;

PackedBatch packed_from(const Batch& b) {
  PackedBatch p;
  p.tokens = b.inputs;
  p.targets = b.targets;
  p.batch_size = b.batch_size;
  p.seq_len = b.seq_len;
  return p;
}

// Random windows of one token stream: a plain-text file, or the documents of {"text"} records
// joined (`kind` says which in the log line).
class TextData : public TrainingData {
 public:
  TextData(TextDataset data, const RunConfig& cfg, std::string kind)
      : data_(std::move(data)),
        sampler_(data_, cfg.train.batch_size, cfg.train.seed),
        val_(data_, cfg.train.batch_size, validation_rows(cfg.train)),
        seq_len_(cfg.train.seq_len),
        kind_(std::move(kind)) {}
  PackedBatch next() override { return packed_from(sampler_.next()); }
  SamplerState state() const override { return sampler_.state(); }
  void restore(const SamplerState& s) override { sampler_.restore(s); }
  bool has_validation() const override { return !data_.val_tokens().empty(); }
  bool next_validation(PackedBatch& out) override {
    Batch b;
    if (!val_.next(b)) return false;
    out = packed_from(b);
    return true;
  }
  void reset_validation() override { val_.reset(); }
  int64_t num_validation_rows() const override { return val_.num_windows(); }
  std::string describe() const override {
    return data_.name() + " (" + kind_ + ": " + std::to_string(data_.train_tokens().size()) +
           " train / " + std::to_string(data_.val_tokens().size()) + " validation tokens)";
  }
  std::string prompt_template() const override { return "none"; }
  int64_t rows_per_epoch() const override {
    return std::max<int64_t>(1, int64_t(data_.train_tokens().size()) / seq_len_);
  }

 private:
  TextDataset data_;
  BatchSampler sampler_;
  ValidationBatches val_;
  int64_t seq_len_;
  std::string kind_;
};

// The options a run reads its records with.
ExampleOptions run_example_options(const RunConfig& cfg) {
  ExampleOptions opt;
  opt.format = cfg.data.format == "auto" ? DataFormat::kAuto : parse_format(cfg.data.format);
  opt.max_tokens = cfg.train.seq_len;
  opt.truncate = cfg.data.truncate;
  opt.model_limit = model_position_limit(cfg);
  opt.quiet = true;  // logged by the caller, on rank 0 only
  opt.columns = cfg.data.columns;
  return opt;
}

// The skip warning and the cache use, once, in rank 0's log (every rank reads the data), before
// the model loads and training starts.
void log_loaded(const LoadedExamples& loaded, std::ostream& log) {
  if (!loaded.warning.empty()) log << loaded.warning << "\n";
  if (!loaded.cache_path.empty())
    log << "token cache: " << loaded.cache_path << (loaded.from_cache ? " (hit)" : " (written)") << "\n";
}

// The examples [first, last) of the table, as a train/validation split (split_examples's, moved
// to start at `first`).
ExampleSplit split_slice(size_t first, size_t last, double val_fraction, uint64_t seed) {
  ExampleSplit s = split_examples(last - first, val_fraction, seed);
  for (auto* ids : {&s.train, &s.val})
    for (uint32_t& id : *ids) id += uint32_t(first);
  return s;
}

class ExampleData : public TrainingData {
 public:
  // `range`: the part of the file's examples the data is ([[data.sources]] split).
  ExampleData(const RunConfig& cfg, LoadedExamples loaded, const SplitRange& range = {})
      : loaded_(std::move(loaded)),
        split_(split_slice(range.first(loaded_.table.size()), range.last(loaded_.table.size()), cfg.data.val_fraction,
                           cfg.train.seed)),
        sampler_(loaded_.table, split_.train, cfg.train.seq_len, cfg.train.batch_size, cfg.train.seed),
        val_(loaded_.table, split_.val, cfg.train.seq_len, cfg.train.batch_size, validation_rows(cfg.train)),
        path_(cfg.data.path) {}
  PackedBatch next() override { return sampler_.next(); }
  SamplerState state() const override { return sampler_.sampler_state(); }
  void restore(const SamplerState& s) override { sampler_.restore(s); }
  bool has_validation() const override { return !split_.val.empty(); }
  bool next_validation(PackedBatch& out) override { return val_.next(out); }
  void reset_validation() override { val_.reset(); }
  int64_t num_validation_rows() const override { return val_.num_rows(); }
  std::string describe() const override {
    return path_ + " (" + std::string(format_name(loaded_.format)) + " examples: " +
           std::to_string(split_.train.size()) + " train / " + std::to_string(split_.val.size()) +
           " validation, " + std::to_string(loaded_.skipped) + " skipped; packed " +
           std::to_string(sampler_.rows_in_epoch()) + " rows per epoch)";
  }
  std::string prompt_template() const override { return std::string(prompt_template_name(loaded_.format)); }
  int64_t rows_per_epoch() const override { return sampler_.rows_in_epoch(); }

 private:
  LoadedExamples loaded_;
  ExampleSplit split_;
  PackedSampler sampler_;
  PackedValidation val_;
  std::string path_;
};

}  // namespace

int64_t validation_rows(const TrainConfig& tc) { return (tc.eval_tokens + tc.seq_len - 1) / tc.seq_len; }

namespace {

bool is_json_file(const std::string& path) {
  const std::string ext = fs::path(path).extension().string();
  return ext == ".json" || ext == ".jsonl";
}

}  // namespace

bool is_example_data(const std::string& path, const std::string& format) {
  if (format == "text" || path.empty()) return false;
  return format != "auto" || is_json_file(path);
}

void refuse_text_format_on_records(const std::string& path, const std::string& format) {
  if (format == "text" && is_json_file(path))
    fail("data.format = \"text\" reads '" + path + "' as plain text, braces and field names included: for "
         "a file of {\"text\": ...} records set data.format = \"text_records\" (or \"auto\", which also "
         "reads the other record formats); rename the file (.txt) if it is meant as plain text");
}

namespace {

// Chat data is rendered by the tokenizer's own chat_template where the interpreter can run it, else
// by the built-in rendering (data/chat_templates.h): what that fallback leaves out of the
// tokenizer's template is named once, in rank 0's log, before training starts.
std::unique_ptr<TrainingData> warn_unreproduced(std::unique_ptr<TrainingData> data, const Tokenizer& tok,
                                                std::ostream& log) {
  const std::string format = data->prompt_template();
  if (format == "none") return data;
  if (const auto warning = chat_template_warning(tok, parse_format(format))) log << *warning << "\n";
  return data;
}

// `n` items cut to `range`, refused in one line when a count reaches past them or none is left.
void require_some(const std::string& path, const SplitRange& range, size_t n, const char* what) {
  if (const std::string why = range.misfit(n, what); !why.empty()) fail("data file '" + path + "': " + why);
}

// `range`: the part of the file a [[data.sources]] split names (the whole file otherwise).
std::unique_ptr<TrainingData> open_data(const RunConfig& cfg, const Tokenizer& tok, std::ostream& log,
                                        const SplitRange& range = {}) {
  // Preference pairs, from one file or a mix of them (a mix's pairs stay whole: PreferenceData).
  if (cfg.train.preference() && !cfg.data.sources.empty()) return std::make_unique<PreferenceData>(cfg, tok, log);
  if (!cfg.data.sources.empty())  // each source read as one file is, below
    return open_mixed_data(cfg, log, [&](const RunConfig& one, const SplitRange& part) {
      return open_data(one, tok, log, part);
    });
  if (cfg.data.path.empty() && cfg.data.format != "auto" && cfg.data.format != "text")
    fail("data.format \"" + cfg.data.format + "\" needs a data.path (the built-in data is plain text)");
  if (cfg.train.preference()) {
    if (cfg.data.path.empty())
      fail("train.method = \"" + cfg.train.method + "\" trains on preference pairs: give data.path, a .json/.jsonl "
           "file of prompt / chosen / rejected records (the built-in data is plain text)");
    return std::make_unique<PreferenceData>(cfg, tok, log);
  }
  refuse_text_format_on_records(cfg.data.path, cfg.data.format);
  if (!is_example_data(cfg.data.path, cfg.data.format)) {
    if (range.begin_rows || range.end_rows)
      fail("data file '" + cfg.data.path + "' is plain text, sliced by percentages of its tokens: split \"" +
           range.text + "\" counts records (give percentages, or a file of records)");
    if (range.whole())
      return std::make_unique<TextData>(
          TextDataset(cfg.data.path, cfg.data.val_fraction, cfg.train.seq_len, &tok), cfg, "plain text");
    // A slice of the file's tokens, then split as the whole file would be.
    const TextDataset whole(cfg.data.path, 0.0, cfg.train.seq_len, &tok);
    const std::vector<int32_t>& all = whole.train_tokens();
    require_some(cfg.data.path, range, all.size(), "tokens");
    return std::make_unique<TextData>(
        TextDataset::from_tokens({all.begin() + std::ptrdiff_t(range.first(all.size())),
                                  all.begin() + std::ptrdiff_t(range.last(all.size()))},
                                 cfg.data.val_fraction, cfg.train.seq_len, cfg.data.path),
        cfg, "plain text, tokens " + std::to_string(range.first(all.size())) + " to " +
                 std::to_string(range.last(all.size())) + " of " + std::to_string(all.size()));
  }
  LoadedExamples loaded = load_examples(cfg.data.path, tok, run_example_options(cfg), cfg.data.cache_dir);
  log_loaded(loaded, log);
  const size_t n = loaded.table.size();
  if (!range.whole())
    require_some(cfg.data.path, range, n, loaded.format == DataFormat::kTextRecords ? "documents" : "examples");
  if (loaded.format != DataFormat::kTextRecords) return std::make_unique<ExampleData>(cfg, std::move(loaded), range);
  const size_t first = range.first(n), last = range.last(n);
  const std::string kind = "text records: " + (range.whole() ? std::to_string(n) + " documents"
                                                             : "documents " + std::to_string(first) + " to " +
                                                                   std::to_string(last) + " of " + std::to_string(n));
  // (A whole table may be empty, with no offsets: TextDataset names the file then.)
  const auto joined = range.whole() ? loaded.table.all_tokens()
                                    : loaded.table.all_tokens().subspan(loaded.table.offsets()[first],
                                                                        loaded.table.offsets()[last] -
                                                                            loaded.table.offsets()[first]);
  return std::make_unique<TextData>(
      TextDataset::from_tokens({joined.begin(), joined.end()}, cfg.data.val_fraction, cfg.train.seq_len,
                               cfg.data.path),
      cfg, kind);
}

}  // namespace

std::unique_ptr<TrainingData> open_training_data(const RunConfig& cfg, const Tokenizer& tok,
                                                 std::ostream& log) {
  return warn_unreproduced(open_data(cfg, tok, log), tok, log);
}

std::string prompt_template_of(const RunConfig& cfg) {
  for (size_t i = 0; i < cfg.data.sources.size(); ++i)  // the first source's that has one
    if (const std::string t = prompt_template_of(source_config(cfg, i, 1.0)); t != "none") return t;
  if (!cfg.data.sources.empty()) return "none";
  if (cfg.train.preference()) {  // the template the pairs were rendered with: read them
    if (cfg.data.format != "auto" && cfg.data.format != "text") return cfg.data.format;
    const DataFormat f = preference_file_format(cfg.data.path, run_tokenizer(cfg).get(), cfg.data.columns);
    return f == DataFormat::kAuto ? "none" : std::string(format_name(f));
  }
  if (!is_example_data(cfg.data.path, cfg.data.format)) return "none";
  if (cfg.data.format != "auto") return std::string(prompt_template_name(parse_format(cfg.data.format)));
  // A chat file's template is the tokenizer's (loaded only then: Alpaca needs none).
  const DataFormat f = example_file_format(cfg.data.path, nullptr, cfg.data.columns);
  return std::string(prompt_template_name(f == DataFormat::kChat ? default_chat_format(*run_tokenizer(cfg)) : f));
}

namespace {

// The tokenizer given (data.tokenizer or the model's), before data.add_tokens.
std::string given_tokenizer_source(const RunConfig& cfg) {
  if (cfg.data.tokenizer == "byte") return "";
  if (!cfg.data.tokenizer.empty()) return cfg.data.tokenizer;
  if (cfg.model_path.empty()) return "";
  fs::path p(cfg.model_path);
  return (fs::is_directory(p) ? p : p.parent_path()).string();
}

}  // namespace

// With data.add_tokens the run's tokenizer is the grown one it writes (train/added_vocab.h).
std::string tokenizer_source(const RunConfig& cfg) {
  return cfg.data.add_tokens.empty() ? given_tokenizer_source(cfg) : added_tokens_dir(cfg);
}

std::string user_chat_template(const RunConfig& cfg) {
  return cfg.data.chat_template.empty() ? std::string() : read_chat_template_file(cfg.data.chat_template);
}

std::unique_ptr<Tokenizer> run_tokenizer(const RunConfig& cfg) {
  if (!cfg.data.add_tokens.empty()) return tokenizer_with_added_tokens(cfg, given_tokenizer_source(cfg));
  const std::string source = tokenizer_source(cfg);
  std::unique_ptr<Tokenizer> tok = source.empty() ? std::make_unique<ByteTokenizer>() : load_tokenizer(source);
  // The user's template replaces the tokenizer's own; unlike a model's template that meshtrain
  // cannot run (a warning, then the built-in one), it must run: refused here, before any data.
  if (!cfg.data.chat_template.empty()) {
    tok->set_chat_template(read_chat_template_file(cfg.data.chat_template));
    std::string why;
    if (!parsed_chat_template(*tok, &why)) fail("data.chat_template " + cfg.data.chat_template + ": " + why);
  }
  return tok;
}

ModelInput input_of(const PackedBatch& b) {
  ModelInput in;
  in.tokens = b.tokens.data();
  in.targets = b.targets.data();
  in.positions = b.positions.empty() ? nullptr : b.positions.data();
  in.segments = b.segments.empty() ? nullptr : b.segments.data();
  in.padding = b.padding.empty() ? nullptr : b.padding.data();
  in.B = b.batch_size;
  in.T = b.seq_len;
  return in;
}

}  // namespace mt
