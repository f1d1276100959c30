#include "data/bpe_tokenizer.h"

#include <algorithm>

#include "core/error.h"
#include "data/unicode.h"

namespace mt {

BpeTokenizer::BpeTokenizer(Config cfg, BpeTables tables, const std::string& source)
    : kind_(std::move(cfg.kind)),
      pattern_(cfg.pattern),
      nfc_(cfg.nfc),
      bpe_(std::move(tables), source),
      bos_(cfg.bos),
      eos_(cfg.eos) {
  // The vocabulary spans every id that means something: BPE tokens and specials.
  vocab_size_ = int64_t(bpe_.tables().token_bytes.size());
  for (const auto& s : cfg.specials) {
    if (s.id < 0) fail(source + ": special token " + s.text + " has negative id");
    vocab_size_ = std::max<int64_t>(vocab_size_, int64_t(s.id) + 1);
  }
  set_special_tokens(std::move(cfg.specials));
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view raw) const {
  std::string normalized;
  if (nfc_) normalized = unicode::nfc(raw);
  const std::string_view text = nfc_ ? std::string_view(normalized) : raw;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 1);
  for (size_t pos = 0; pos < text.size();) {
    size_t end = next_piece_end(pattern_, text, pos);
    bpe_.encode_piece(text.substr(pos, end - pos), out);
    pos = end;
  }
  return out;
}

std::string BpeTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    // Specials first: an added token may shadow a vocab entry with the same id.
    if (const std::string* s = special_text(ids[i])) {
      out += *s;
    } else if (const std::string* b = bpe_.token_bytes(ids[i])) {
      out += *b;
    } else {
      fail(std::string(kind_) + " tokenizer: cannot decode unknown token id " +
           std::to_string(ids[i]) + " at position " + std::to_string(i) + " (vocab size " +
           std::to_string(vocab_size_) + ")");
    }
  }
  return out;
}

}  // namespace mt
