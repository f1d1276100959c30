// Special tokens added to a tokenizer (data.add_tokens: a chat template's markers on a base
// model), as transformers' tokenizer.add_tokens(..., special_tokens=True) adds them: each after
// the last id, in the order given, written into the HF tokenizer.json ("added_tokens") and
// tokenizer_config.json ("added_tokens_decoder"), so meshtrain, transformers and llama.cpp's
// converters read the grown tokenizer from the same files.
#pragma once
#include <set>
#include <string>
#include <vector>

#include "core/error.h"

namespace mt {

// Writes into `dir` the tokenizer at `source` (a tokenizer file or directory; data.tokenizer's
// forms but "byte") as HF files with `tokens` added as special tokens after its last id. A token
// the tokenizer already has as a special token is skipped, and said in the returned notes; an
// empty or repeated token is refused (mt::Error naming it). Returns the notes.
std::vector<std::string> write_tokenizer_with_added_tokens(const std::string& source,
                                                           const std::vector<std::string>& tokens,
                                                           const std::string& dir);

// Refuses (mt::Error naming the key) a list with an empty or repeated token. Inline: the run
// config's check calls it, and the config fuzz target links no tokenizer code.
inline void check_added_tokens(const std::vector<std::string>& tokens) {
  std::set<std::string> seen;
  for (const std::string& t : tokens) {
    if (t.empty()) fail("data.add_tokens: an empty token cannot be added");
    if (!seen.insert(t).second) fail("data.add_tokens: '" + t + "' is listed twice");
  }
}

}  // namespace mt
