// llama2.c's sentencepiece export (tokenizer.bin / tok512.bin), encoded the way llama2.c's
// encode() does: a dummy " " before non-empty text, one token per UTF-8 character (byte tokens
// <0xXX> at id byte+3 for characters not in the vocab), then repeatedly merge the adjacent pair
// whose concatenation is a token with the highest score. Decoding drops the dummy space of the
// first piece (at the start and after each BOS) and turns <0xXX> into raw bytes.
#pragma once
#include <string>
#include <unordered_map>
#include <vector>

#include "data/tokenizer.h"

namespace mt {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  static constexpr int32_t kUnk = 0, kBos = 1, kEos = 2, kFirstByteToken = 3;

  // `pieces` and `scores` by id; mt::Error (prefixed with `source`) if ids 3..258 are not the
  // byte tokens <0x00>..<0xFF>, which byte fallback relies on.
  SentencePieceTokenizer(std::vector<std::string> pieces, std::vector<float> scores,
                         const std::string& source);

  std::string_view kind() const override { return "sentencepiece"; }
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override { return int64_t(pieces_.size()); }
  int32_t bos_id() const override { return kBos; }
  int32_t eos_id() const override { return kEos; }

 private:
  int32_t lookup(std::string_view s) const;
  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  // Only normal pieces: llama2.c also looks up <unk>, <s>, </s> and <0xXX> here, so the text
  // "<0x41>" could merge into the byte token for 'A' and not round-trip. Real sentencepiece
  // never produces control or byte tokens from text, so neither do we.
  std::unordered_map<std::string, int32_t> normal_ids_;
};

}  // namespace mt
