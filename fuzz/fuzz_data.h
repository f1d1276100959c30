// What the data fuzz targets (examples, preference_pairs) share: their tokenizer (every byte a
// token, and when asked the four Llama 3 chat tokens, so a chat template has what it needs;
// deterministic and trivial, so that a crash is the reader's, not the tokenizer's), and the check
// of an example a trainer relies on.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/examples.h"
#include "data/tokenizer.h"
#include "fuzz_support.h"

namespace fuzz {

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

// Tokens and mask of one length, ids inside the vocabulary, at most max_tokens of them (0: no
// limit), and a trained token to predict (not the first).
inline void require_trainable(const mt::Example& ex, int64_t max_tokens, const mt::Tokenizer& tok) {
  require(ex.tokens.size() == ex.trained.size());
  require(max_tokens == 0 || int64_t(ex.tokens.size()) <= max_tokens);
  bool predicts = false;
  for (size_t i = 0; i < ex.tokens.size(); ++i) {
    require(ex.tokens[i] >= 0 && ex.tokens[i] < tok.vocab_size());
    require(ex.trained[i] <= 1);
    predicts = predicts || (i > 0 && ex.trained[i]);
  }
  require(predicts);
}

}  // namespace fuzz
