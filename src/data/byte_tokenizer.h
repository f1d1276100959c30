// Byte-level tokenizer: every byte of the UTF-8 text is one token, id = byte value (0..255).
// No merges, no special tokens; any byte string round-trips exactly.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer.h"

namespace mt {

class ByteTokenizer final : public Tokenizer {
 public:
  static constexpr int64_t kVocabSize = 256;

  std::string_view kind() const override { return "byte"; }
  int64_t vocab_size() const override { return kVocabSize; }
  std::vector<int32_t> encode(std::string_view text) const override;
  // Throws mt::Error naming the first id outside 0..255.
  std::string decode(std::span<const int32_t> ids) const;
  std::string decode(const std::vector<int32_t>& ids) const override {
    return decode(std::span<const int32_t>(ids));
  }
};

}  // namespace mt
