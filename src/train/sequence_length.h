// train.seq_len = 0, "not given": the length a run takes. Without model.path it is the built-in
// run's kBuiltinSeqLen, 128 (run_config.h; decided when the config is parsed, since it needs nothing but the config). With a
// model it comes from the data when the run starts: the longest example (tokens after the
// template) rounded up to a multiple of 64, capped at the model's max_position_embeddings and at
// kSeqLenCeiling. run.toml and the checkpoints record the length chosen, so a rerun or a resume
// of the run takes the same one.
#pragma once
#include <cstdint>
#include <string>

#include "data/tokenizer.h"
#include "train/run_config.h"

namespace mt {

// Chosen lengths are rounded up to this (whole GEMM tiles; fewer distinct shapes).
inline constexpr int64_t kSeqLenMultiple = 64;
// The longest length chosen from the data without being asked. Activation memory grows with the
// length and attention's work with its square, and every packed row pays for it; one very long
// example should not make a whole fine-tune several times dearer. Longer examples are then
// skipped and counted (or cut, data.truncate); a longer train.seq_len is one --set away.
inline constexpr int64_t kSeqLenCeiling = 2048;

// The longest sequence the run's model takes: the model file's max_position_embeddings with
// model.path, else model.max_position_embeddings.
int64_t model_position_limit(const RunConfig& cfg);

// The chosen length for a longest example of `longest` tokens under a model limit of `limit`:
// rounded up to kSeqLenMultiple, then capped at `limit` and kSeqLenCeiling.
int64_t seq_len_for_longest(int64_t longest, int64_t limit);

struct SeqLenChoice {
  int64_t seq_len = 0;
  std::string reason;  // one line for the log; empty when train.seq_len was given
};

// cfg.train.seq_len when it is given (> 0); else chosen as above for a model limit of `limit`
// (model_position_limit), reading example data (through the token cache, data.cache_dir) with
// `tok`, the run's tokenizer (may be null for plain text). Plain text has no examples to
// measure: it takes kBuiltinSeqLen, capped at the model's limit.
SeqLenChoice choose_seq_len(const RunConfig& cfg, const Tokenizer* tok, int64_t limit);

// cfg.train.seq_len chosen when it is 0 (loading the run's tokenizer for it); returns the
// reason line, empty when nothing was chosen.
std::string settle_seq_len(RunConfig& cfg);

}  // namespace mt
