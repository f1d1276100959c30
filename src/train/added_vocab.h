// data.add_tokens in a run: the grown tokenizer it writes and reads (<output.dir>/tokenizer), and
// the vocabulary its model gets. See docs/fine-tuning.md, "Adding tokens".
#pragma once
#include <memory>
#include <string>

#include "data/tokenizer.h"
#include "train/run_config.h"

namespace mt {

// <output.dir>/tokenizer: the run's tokenizer with data.add_tokens added (HF tokenizer.json and
// tokenizer_config.json), which the run's model directories, adapters and exports copy.
std::string added_tokens_dir(const RunConfig& cfg);

// The run's tokenizer with data.add_tokens added to the one at `given_source`: written into
// added_tokens_dir (replacing what differs there), then read from there. Skipped tokens (already
// special) are said on stderr when it is first written.
std::unique_ptr<Tokenizer> tokenizer_with_added_tokens(const RunConfig& cfg, const std::string& given_source);

// The run's model vocabulary: the model's `model_vocab`, or the tokenizer's size where
// data.add_tokens took the tokenizer past it (the model's embedding and head then grow,
// model/vocab_growth.h). A tokenizer larger than the model otherwise is refused, naming both
// sizes and `where` the model comes from (a larger model vocabulary is padding: allowed).
int64_t run_vocab_size(const RunConfig& cfg, const Tokenizer& tok, int64_t model_vocab, const std::string& where);

}  // namespace mt
