#include "data/byte_tokenizer.h"

#include "core/error.h"

namespace mt {

std::vector<int32_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = int32_t(static_cast<unsigned char>(text[i]));
  return ids;
}

std::string ByteTokenizer::decode(std::span<const int32_t> ids) const {
  std::string out(ids.size(), '\0');
  for (size_t i = 0; i < ids.size(); ++i) {
    int32_t id = ids[i];
    if (id < 0 || id >= kVocabSize)
      fail("byte tokenizer: cannot decode token id " + std::to_string(id) + " at position " +
           std::to_string(i) + " (expected 0..255)");
    out[i] = static_cast<char>(static_cast<unsigned char>(id));
  }
  return out;
}

}  // namespace mt
