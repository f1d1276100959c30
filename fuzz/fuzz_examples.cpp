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
#include "core/error.h"
#include "data/examples.h"

namespace {

using fuzz::require;

// Bytes as tokens 0..255 plus, when asked, the four Llama 3 chat tokens as 256..259
// (<|begin_of_text|> doubling as BOS, <|eot_id|> as EOS), so render_chat has what it needs.
class FuzzTokenizer final : public mt::Tokenizer {
 public:
  explicit FuzzTokenizer(bool chat) : chat_(chat) {
    if (chat)
      set_special_tokens({{"<|begin_of_text|>", 256}, {"<|start_header_id|>", 257},
                          {"<|end_header_id|>", 258}, {"<|eot_id|>", 259}});
  }
  std::string_view kind() const override { return chat_ ? "fuzz-chat" : "fuzz"; }
  std::vector<int32_t> encode(std::string_view text) const override {
    return std::vector<int32_t>(reinterpret_cast<const uint8_t*>(text.data()),
                                reinterpret_cast<const uint8_t*>(text.data()) + text.size());
  }
  std::string decode(const std::vector<int32_t>& ids) const override { return std::string(ids.size(), 'x'); }
  int64_t vocab_size() const override { return chat_ ? 260 : 256; }
  int32_t bos_id() const override { return chat_ ? 256 : -1; }
  int32_t eos_id() const override { return chat_ ? 259 : -1; }

 private:
  bool chat_;
};

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
  for (const mt::Example& ex : set.examples) {
    require(ex.tokens.size() == ex.trained.size());
    require(o.max_tokens == 0 || int64_t(ex.tokens.size()) <= o.max_tokens);
    bool predicts = false;
    for (size_t i = 0; i < ex.tokens.size(); ++i) {
      require(ex.tokens[i] >= 0 && ex.tokens[i] < tok.vocab_size());
      require(ex.trained[i] <= 1);
      predicts = predicts || (i > 0 && ex.trained[i]);
    }
    require(predicts);
  }
  return 0;
}
