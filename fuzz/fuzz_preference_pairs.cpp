// libFuzzer target: preference-pair files for DPO-style training (parse_preference_pairs, the text
// behind read_preference_pairs). Built by scripts/fuzz.sh (clang++, libFuzzer, ASan, UBSan).
//
// The first input byte picks the options (format, .json or .jsonl name, length limits, truncation
// mode, a tokenizer with or without the Llama 3 chat tokens); the rest is the file. Reading must
// succeed or throw mt::Error, never anything else, and what it returns must be what the preference
// trainer relies on: two sequences per pair, tokens and mask of one length, ids inside the
// vocabulary, no sequence longer than the limit, a trained token to predict in each, the chosen and
// the rejected sequence starting with the same untrained prompt, every record a pair or a skip.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "fuzz_data.h"
#include "core/error.h"
#include "data/preference_pairs.h"

namespace {

using fuzz::FuzzTokenizer;
using fuzz::require;

size_t untrained_prefix(const mt::Example& ex) {
  size_t n = 0;
  while (n < ex.trained.size() && !ex.trained[n]) ++n;
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const FuzzTokenizer chat(true), plain(false);
  const uint8_t opts = data[0];
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  mt::PreferenceOptions o;
  o.format = opts % 3 == 0 ? mt::DataFormat::kAuto : opts % 3 == 1 ? mt::DataFormat::kAlpaca : mt::DataFormat::kChat;
  o.truncation = (opts & 4) ? mt::TruncationMode::kKeepStart : mt::TruncationMode::kKeepEnd;
  o.max_length = (opts >> 3) % 3 == 0 ? 0 : (opts >> 3) % 3 == 1 ? 24 : 200;
  o.max_prompt_length = (opts & 128) ? 5 : 0;
  o.quiet = true;
  const mt::Tokenizer& tok = (opts & 32) ? plain : chat;
  const std::string name = (opts & 64) ? "fuzz.jsonl" : "fuzz.json";
  mt::PreferenceSet set;
  try {
    set = mt::parse_preference_pairs(text, name, tok, o);
  } catch (const mt::Error&) {
    return 0;
  }
  require(set.sequences.size() % 2 == 0 && set.pairs() > 0);
  require(int64_t(set.pairs()) + set.skipped == set.records);
  require(set.truncated <= int64_t(set.pairs()));
  require((set.skipped == 0 && set.truncated == 0) == set.warning.empty());
  for (const mt::Example& ex : set.sequences) fuzz::require_trainable(ex, o.max_length, tok);
  for (size_t p = 0; p < set.pairs(); ++p) {
    const mt::Example& c = set.sequences[2 * p];
    const mt::Example& r = set.sequences[2 * p + 1];
    const size_t n = untrained_prefix(c);
    require(n == untrained_prefix(r) && std::equal(c.tokens.begin(), c.tokens.begin() + std::ptrdiff_t(n), r.tokens.begin()));
  }
  return 0;
}
