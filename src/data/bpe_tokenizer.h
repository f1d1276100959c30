// A byte-level BPE tokenizer: an optional NFC normalizer, a pre-tokenizer pattern, the BPE
// encoder and special tokens.
// The tiktoken, tokenizer.json and GPT-2 readers (tokenizer_readers.h) all build one of these.
#pragma once
#include <string>

#include "data/bpe.h"
#include "data/pretokenize.h"
#include "data/tokenizer.h"

namespace mt {

class BpeTokenizer final : public Tokenizer {
 public:
  struct Config {
    std::string kind;  // reported by kind()
    SplitPattern pattern = SplitPattern::kLlama3;
    // Normalise text to NFC before splitting it (HF's NFC normalizer: the Qwen tokenizers).
    bool nfc = false;
    std::vector<Special> specials;  // ids outside the BPE tables or shadowing them
    int32_t bos = -1, eos = -1;
  };
  // `source` (the file) prefixes any mt::Error.
  BpeTokenizer(Config cfg, BpeTables tables, const std::string& source);

  std::string_view kind() const override { return kind_; }
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override { return vocab_size_; }
  int32_t bos_id() const override { return bos_; }
  int32_t eos_id() const override { return eos_; }
  SplitPattern pattern() const { return pattern_; }
  bool normalizes_nfc() const { return nfc_; }
  const BpeTables& tables() const { return bpe_.tables(); }

 private:
  std::string kind_;
  SplitPattern pattern_;
  bool nfc_;
  BpeEncoder bpe_;
  int32_t bos_, eos_;
  int64_t vocab_size_;
};

}  // namespace mt
