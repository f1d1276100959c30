// llama2.c's sentencepiece export (tokenizer.bin / tok512.bin) -> SentencePieceTokenizer. The
// file has only pieces and scores; the types follow llama2.c's fixed layout (<unk>, <s>, </s>,
// then the 256 byte pieces) and spaces are stored as " ". Encoded like llama2.c's encode(): a
// dummy " " before non-empty text and no other normalisation.
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/tokenizer_readers.h"

namespace mt {

std::unique_ptr<Tokenizer> read_llama2c_tokenizer(std::string_view content, const std::string& name) {
  size_t pos = 0;
  auto take = [&](void* dst, size_t n, const char* what, size_t id) {
    if (content.size() - pos < n)
      fail(name + ": truncated llama2.c tokenizer (" + what + " of token " + std::to_string(id) +
           " needs " + std::to_string(n) + " bytes at offset " + std::to_string(pos) + ")");
    std::memcpy(dst, content.data() + pos, n);
    pos += n;
  };
  int32_t max_len = 0;
  take(&max_len, 4, "header", 0);
  if (max_len <= 0) fail(name + ": bad max_token_length " + std::to_string(max_len));
  using Type = SentencePieceTokenizer::PieceType;
  SentencePieceTokenizer::Vocab v;
  v.space = " ";
  v.llama2c_chars = true;
  while (pos < content.size()) {
    size_t id = v.pieces.size();
    if (id > size_t(kMaxTokenId)) fail(name + ": too many tokens");
    float score;
    int32_t len;
    take(&score, 4, "score", id);
    take(&len, 4, "length", id);
    if (score != score) fail(name + ": token " + std::to_string(id) + " has a NaN score");
    if (len < 0 || len > max_len)
      fail(name + ": token " + std::to_string(id) + " has length " + std::to_string(len) +
           " outside 0.." + std::to_string(max_len));
    // Checked before allocating: a corrupt length must not become a huge allocation.
    if (size_t(len) > content.size() - pos)
      fail(name + ": truncated llama2.c tokenizer (token " + std::to_string(id) + " needs " +
           std::to_string(len) + " bytes at offset " + std::to_string(pos) + ")");
    std::string piece(size_t(len), '\0');
    take(piece.data(), size_t(len), "bytes", id);
    v.pieces.push_back(std::move(piece));
    v.scores.push_back(score);
  }
  constexpr size_t kFirstByte = 3;
  if (v.pieces.size() < kFirstByte + 256)
    fail(name + ": " + std::to_string(v.pieces.size()) +
         " tokens; a llama2.c tokenizer has <unk>, <s>, </s> and 256 byte tokens first");
  v.types.assign(v.pieces.size(), Type::normal);
  v.types[0] = Type::unknown;
  v.types[1] = v.types[2] = Type::control;
  // llama2.c's export writes these three as "<unk>", "\n<s>\n" and "\n</s>\n"; their names are
  // sentencepiece's (and what an HF tokenizer.json written from this file must use).
  v.pieces[0] = "<unk>";
  v.pieces[1] = "<s>";
  v.pieces[2] = "</s>";
  for (size_t b = 0; b < 256; ++b) {
    char expect[8];
    std::snprintf(expect, sizeof expect, "<0x%02X>", unsigned(b));
    if (v.pieces[kFirstByte + b] != expect)
      fail(name + ": token " + std::to_string(kFirstByte + b) + " should be " + expect);
    v.types[kFirstByte + b] = Type::byte;
  }
  return std::make_unique<SentencePieceTokenizer>(std::move(v), name);
}

}  // namespace mt
