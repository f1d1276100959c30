// libFuzzer target: Alpaca and chat example files (parse_examples, the text behind
// read_examples). Built by scripts/fuzz.sh (clang++, libFuzzer, ASan, UBSan).
//
// The first input byte picks the options (format, .json or .jsonl name, truncation, length limit,
// a tokenizer with or without the Llama 3 chat tokens); the rest is the file. Reading must
// succeed or throw mt::Error, never anything else, and what it returns must be what training
// relies on: tokens and mask of one length, ids inside the vocabulary, no example longer than the
// limit, at least one trained token to predict, every record either an example or a skip.
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "fuzz_data.h"
#include "core/error.h"
#include "data/examples.h"

namespace {

using fuzz::FuzzTokenizer;
using fuzz::require;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const FuzzTokenizer chat(true), plain(false);
  const uint8_t opts = data[0];
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  mt::ExampleOptions o;
  o.format = opts % 3 == 0 ? mt::DataFormat::kAuto : opts % 3 == 1 ? mt::DataFormat::kAlpaca : mt::DataFormat::kChat;
  o.truncate = opts & 4;
  o.max_tokens = (opts >> 3) % 3 == 0 ? 0 : (opts >> 3) % 3 == 1 ? 12 : 200;
  o.quiet = true;
  const mt::Tokenizer& tok = (opts & 32) ? plain : chat;
  const std::string name = (opts & 64) ? "fuzz.jsonl" : "fuzz.json";
  mt::ExampleSet set;
  try {
    set = mt::parse_examples(text, name, tok, o);
  } catch (const mt::Error&) {
    return 0;
  }
  require(set.format != mt::DataFormat::kAuto);
  require(!set.examples.empty() && int64_t(set.examples.size()) + set.skipped == set.records);
  require(set.too_long <= set.skipped && (set.skipped == 0) == set.warning.empty());
  for (const mt::Example& ex : set.examples) fuzz::require_trainable(ex, o.max_tokens, tok);
  return 0;
}
