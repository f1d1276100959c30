#include "io/gguf_tokenizer.h"

#include <fstream>

#include "core/error.h"
#include "core/regular_file.h"

namespace mt {

namespace {
bool is_byte_token(const std::string& t) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); };
  return t.size() == 6 && t.compare(0, 3, "<0x") == 0 && hex(t[3]) && hex(t[4]) && t[5] == '>';
}

std::string spaces_to_word_marker(const std::string& t) {
  static const std::string marker = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK
  std::string out;
  for (char c : t) {
    if (c == ' ') out += marker;
    else out += c;
  }
  return out;
}
}  // namespace

TokenizerInfo tokenizer_info_from_llama2c(const std::string& path, int64_t vocab_size) {
  require_regular_file(path, "llama2.c tokenizer");
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(path + ": cannot open llama2.c tokenizer");
  f.seekg(0, std::ios::end);
  const int64_t size = f.tellg();
  f.seekg(0);
  int32_t max_len = 0;
  if (!f.read(reinterpret_cast<char*>(&max_len), 4) || max_len <= 0)
    fail(path + ": not a llama2.c tokenizer (bad max_token_length header)");
  TokenizerInfo info;
  info.model = "llama";
  info.bos = 1, info.eos = 2;
  for (int64_t id = 0; vocab_size < 0 ? f.tellg() < size : id < vocab_size; ++id) {
    float score = 0;
    int32_t len = 0;
    if (!f.read(reinterpret_cast<char*>(&score), 4) || !f.read(reinterpret_cast<char*>(&len), 4))
      fail(path + ": truncated at token " + std::to_string(id));
    if (len < 0 || len > max_len)
      fail(path + ": token " + std::to_string(id) + " has length " + std::to_string(len) +
           " (max_token_length " + std::to_string(max_len) + ")");
    std::string bytes(size_t(len), '\0');
    if (!f.read(bytes.data(), len)) fail(path + ": truncated at token " + std::to_string(id));
    int32_t type = kTokenNormal;
    if (id == 0) {
      type = kTokenUnknown;
    } else if (id == 1 || id == 2) {
      type = kTokenControl;
      bytes = id == 1 ? "<s>" : "</s>";
    } else if (is_byte_token(bytes)) {
      type = kTokenByte;
    } else {
      bytes = spaces_to_word_marker(bytes);
    }
    info.tokens.push_back(std::move(bytes));
    info.scores.push_back(score);
    info.token_types.push_back(type);
  }
  if (info.tokens.size() < 3) fail(path + ": fewer than 3 tokens (no <unk>, <s>, </s>)");
  return info;
}

}  // namespace mt
