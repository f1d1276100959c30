// The hostile tokenizer of issue 34 (item 7): added tokens "a"^k "b" for k = 1..count, as an HF
// tokenizer.json's non-special added tokens are read (user-defined pieces split out of the text
// before anything else), beside byte pieces and the plain pieces "a", "b", "x" and "y". Shared by
// tests/test_added_tokens.cpp and bench/bench_added_tokens.cpp.
#pragma once
#include <cstdio>
#include <string>

#include "data/sentencepiece_tokenizer.h"

namespace mt::testing {

// Id of the added token "a"^k "b" in crafted_added_token_vocab.
inline constexpr int32_t kFirstAddedId = 3 + 256 + 4;
inline int32_t added_token_id(int k) { return kFirstAddedId + k - 1; }

inline SentencePieceTokenizer::Vocab crafted_added_token_vocab(int count) {
  using Type = SentencePieceTokenizer::PieceType;
  SentencePieceTokenizer::Vocab v;
  auto add = [&](std::string piece, Type type) {
    v.pieces.push_back(std::move(piece));
    v.scores.push_back(0.0f);
    v.types.push_back(type);
  };
  add("<unk>", Type::unknown);
  add("<s>", Type::control);
  add("</s>", Type::control);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    add(name, Type::byte);
  }
  for (const char* p : {"a", "b", "x", "y"}) add(p, Type::normal);
  for (int k = 1; k <= count; ++k) add(std::string(size_t(k), 'a') + "b", Type::user_defined);
  v.add_dummy_prefix = false;  // each character is then its own piece: no prefix to account for
  v.added_tokens_first = true;
  return v;
}

}  // namespace mt::testing
