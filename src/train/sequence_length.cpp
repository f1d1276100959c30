#include "train/sequence_length.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "core/error.h"
#include "data/examples.h"
#include "data/preference_pairs.h"
#include "data/token_cache.h"
#include "io/pretrained.h"
#include "train/mixed_data.h"
#include "train/training_data.h"

namespace mt {

int64_t model_position_limit(const RunConfig& cfg) {
  return cfg.model_path.empty() ? cfg.model.max_position_embeddings
                                : pretrained_config(cfg.model_path).max_position_embeddings;
}

int64_t seq_len_for_longest(int64_t longest, int64_t limit) {
  const int64_t rounded = (std::max<int64_t>(longest, 1) + kSeqLenMultiple - 1) / kSeqLenMultiple * kSeqLenMultiple;
  return std::min({rounded, limit, kSeqLenCeiling});
}

namespace {

// The items [first, last) of n that `range` keeps, refused in one line as opening the data would.
std::pair<size_t, size_t> split_items_kept(const RunConfig& cfg, const SplitRange& range, size_t n,
                                           const char* items) {
  if (const std::string why = range.misfit(n, items); !why.empty()) fail("data file '" + cfg.data.path + "': " + why);
  return {range.first(n), range.last(n)};
}

// " in split train[:10%]", or "" for the whole file.
std::string in_split_text(const SplitRange& range) { return range.whole() ? "" : " in split " + range.text; }

// As choose_seq_len, measuring only the part of the file `range` keeps (a [[data.sources]] split):
// the length is the longest the run trains on, not the longest of a file it takes a slice of.
SeqLenChoice choose_seq_len_in(const RunConfig& cfg, const Tokenizer* tok, int64_t limit, const SplitRange& range) {
  if (cfg.train.seq_len > 0) return {cfg.train.seq_len, ""};
  const std::string limit_text = "the model's max_position_embeddings, " + std::to_string(limit);
  // Windows of a token stream fit any length: the built-in one.
  auto unmeasured = [&](const std::string& what) -> SeqLenChoice {
    const int64_t len = std::min(kBuiltinSeqLen, limit);
    return {len, "train.seq_len " + std::to_string(len) + ": " + what + " has no examples to measure, so the built-in " +
                     std::to_string(kBuiltinSeqLen) + (len < kBuiltinSeqLen ? " capped at " + limit_text : "") +
                     " (set train.seq_len to choose)"};
  };
  if (!cfg.data.sources.empty()) {  // the longest the sources ask for
    SeqLenChoice longest{0, ""};
    for (size_t i = 0; i < cfg.data.sources.size(); ++i) {
      SeqLenChoice c;
      try {
        c = choose_seq_len_in(source_config(cfg, i, 1.0), tok, limit, *parse_split(cfg.data.sources[i].split));
      } catch (const Error& e) {  // which source the file's own message is about
        fail("data.sources: source " + std::to_string(i + 1) + ": " + e.what());
      }
      if (c.seq_len > longest.seq_len) longest = {c.seq_len, "source " + std::to_string(i + 1) + ": " + c.reason};
    }
    return longest;
  }
  if (!is_example_data(cfg.data.path, cfg.data.format) && !cfg.train.preference()) return unmeasured("plain text");
  if (!tok) fail("choose_seq_len: example data needs the run's tokenizer");
  if (cfg.train.preference()) {  // preference pairs: their longest sequence, uncut
    PreferenceOptions opt;
    opt.format = cfg.data.format == "auto" || cfg.data.format == "text" ? DataFormat::kAuto : parse_format(cfg.data.format);
    opt.quiet = true;
    opt.columns = cfg.data.columns;
    const std::vector<Example> seqs = read_preference_pairs(cfg.data.path, *tok, opt).sequences;
    const auto [first, last] = split_items_kept(cfg, range, seqs.size() / 2, "preference pairs");
    int64_t longest = 0;
    for (size_t i = 2 * first; i < 2 * last; ++i) longest = std::max(longest, int64_t(seqs[i].tokens.size()));
    const int64_t len = seq_len_for_longest(longest, limit);
    return {len, "train.seq_len " + std::to_string(len) + " from the data: its longest preference sequence" +
                     in_split_text(range) + " is " + std::to_string(longest) + " tokens" +
                     (len < longest ? " (longer pairs are truncated)" : "")};
  }
  // Every example, however long (the cache keeps this reading for the next run).
  ExampleOptions opt;
  opt.format = cfg.data.format == "auto" ? DataFormat::kAuto : parse_format(cfg.data.format);
  opt.quiet = true;
  opt.columns = cfg.data.columns;
  const LoadedExamples ex = load_examples(cfg.data.path, *tok, opt, cfg.data.cache_dir);
  if (ex.format == DataFormat::kTextRecords) return unmeasured("text records (documents cut into windows)");
  const auto [first, last] = split_items_kept(cfg, range, ex.table.size(), "examples");
  int64_t longest = 0;
  for (size_t i = first; i < last; ++i) longest = std::max(longest, ex.table.length(i));
  const int64_t len = seq_len_for_longest(longest, limit);
  std::string why = "train.seq_len " + std::to_string(len) + " from the data: its longest example" +
                    in_split_text(range) + " is " + std::to_string(longest) + " tokens";
  if (len >= longest)
    why += len > longest ? ", rounded up to a multiple of " + std::to_string(kSeqLenMultiple) : "";
  else if (len == limit)
    why += ", capped at " + limit_text;
  else
    why += ", capped at meshtrain's ceiling of " + std::to_string(kSeqLenCeiling) +
           " for a length not given (set train.seq_len for more)";
  return {len, why};
}

}  // namespace

SeqLenChoice choose_seq_len(const RunConfig& cfg, const Tokenizer* tok, int64_t limit) {
  return choose_seq_len_in(cfg, tok, limit, SplitRange{});
}

std::string settle_seq_len(RunConfig& cfg) {
  if (cfg.train.seq_len > 0) return "";
  // The model first: a path that is not a model is named as such, not as a missing tokenizer.
  const int64_t limit = model_position_limit(cfg);
  // Only examples are measured, and only they need the tokenizer here.
  const bool examples =
      is_example_data(cfg.data.path, cfg.data.format) || cfg.train.preference() || !cfg.data.sources.empty();
  const std::unique_ptr<Tokenizer> tok = examples ? run_tokenizer(cfg) : nullptr;
  const SeqLenChoice choice = choose_seq_len(cfg, tok.get(), limit);
  cfg.train.seq_len = choice.seq_len;
  return choice.reason;
}

}  // namespace mt
