#include "cli/chunked_encode.h"

#include "data/bpe_tokenizer.h"
#include "data/byte_tokenizer.h"

namespace mt::cli {
namespace {

bool ascii_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool ascii_alnum(char c) { return ascii_letter(c) || (c >= '0' && c <= '9'); }

// Whether `tok` gives the same ids for a text as for its parts cut at safe_cut places.
bool can_cut(const Tokenizer& tok, bool specials) {
  if (specials)
    for (const Tokenizer::Special& s : tok.special_tokens())
      if (s.text.find(' ') != std::string::npos) return false;
  if (dynamic_cast<const ByteTokenizer*>(&tok)) return true;
  const auto* bpe = dynamic_cast<const BpeTokenizer*>(&tok);
  return bpe && bpe->pattern() != SplitPattern::kNone;
}

// A space at `i` between an ASCII letter or digit and an ASCII letter.
bool safe_cut(std::string_view text, size_t i) {
  return i > 0 && i + 1 < text.size() && text[i] == ' ' && ascii_alnum(text[i - 1]) && ascii_letter(text[i + 1]);
}

// Where the part starting at `begin` ends: the last safe cut at most `chunk_bytes` on, else the
// first one after that, else the end of the text.
size_t part_end(std::string_view text, size_t begin, size_t chunk_bytes) {
  if (text.size() - begin <= chunk_bytes) return text.size();
  for (size_t i = begin + chunk_bytes; i > begin; --i)
    if (safe_cut(text, i)) return i;
  for (size_t i = begin + chunk_bytes + 1; i < text.size(); ++i)
    if (safe_cut(text, i)) return i;
  return text.size();
}

}  // namespace

void encode_in_chunks(const Tokenizer& tok, std::string_view text, bool specials,
                      const std::function<void(const std::vector<int32_t>&)>& visit, size_t chunk_bytes) {
  auto encode = [&](std::string_view part) { visit(specials ? tok.encode_with_specials(part) : tok.encode(part)); };
  if (!can_cut(tok, specials)) return encode(text);
  for (size_t begin = 0; begin < text.size();) {
    const size_t end = part_end(text, begin, chunk_bytes);
    encode(text.substr(begin, end - begin));
    begin = end;
  }
}

}  // namespace mt::cli
