#include "data/sentencepiece_tokenizer.h"

#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "data/merge_queue.h"
#include "data/tokenizer_readers.h"

namespace mt {
namespace {

std::string byte_piece(int b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "<0x%02X>", b);
  return buf;
}

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(std::vector<std::string> pieces,
                                               std::vector<float> scores, const std::string& source)
    : pieces_(std::move(pieces)), scores_(std::move(scores)) {
  if (pieces_.size() < size_t(kFirstByteToken + 256))
    fail(source + ": " + std::to_string(pieces_.size()) +
         " tokens; a llama2.c tokenizer has <unk>, <s>, </s> and 256 byte tokens first");
  for (int b = 0; b < 256; ++b)
    if (pieces_[kFirstByteToken + b] != byte_piece(b))
      fail(source + ": token " + std::to_string(kFirstByteToken + b) + " should be " + byte_piece(b));
  for (size_t id = kFirstByteToken + 256; id < pieces_.size(); ++id)
    normal_ids_.emplace(pieces_[id], int32_t(id));  // first of duplicate pieces wins
  set_special_tokens({{"<unk>", kUnk}, {"<s>", kBos}, {"</s>", kEos}});
}

int32_t SentencePieceTokenizer::lookup(std::string_view s) const {
  auto it = normal_ids_.find(std::string(s));
  return it == normal_ids_.end() ? -1 : it->second;
}

std::vector<int32_t> SentencePieceTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  if (text.empty()) return ids;
  auto push_unit = [&](std::string_view unit) {
    int32_t id = lookup(unit);
    if (id >= 0) {
      ids.push_back(id);
    } else {
      for (unsigned char c : unit) ids.push_back(kFirstByteToken + c);
    }
  };
  push_unit(" ");  // the dummy prefix
  // llama2.c's grouping: a byte plus up to three following continuation bytes, valid or not.
  for (size_t i = 0; i < text.size();) {
    size_t j = i + 1;
    while (j < text.size() && j - i < 4 && (static_cast<unsigned char>(text[j]) & 0xC0) == 0x80) ++j;
    push_unit(text.substr(i, j - i));
    i = j;
  }
  std::string joined;
  // Highest score first: priority is the negated score, smaller merges first.
  merge_adjacent_pairs<float>(ids, [&](int32_t l, int32_t r) -> std::optional<PairMerge<float>> {
    joined.assign(pieces_[l]);
    joined += pieces_[r];
    int32_t id = lookup(joined);
    if (id < 0) return std::nullopt;
    return PairMerge<float>{-scores_[id], id};
  });
  return ids;
}

std::string SentencePieceTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  bool at_start = true;  // the next piece carries the dummy-prefix space
  for (size_t i = 0; i < ids.size(); ++i) {
    int32_t id = ids[i];
    if (id < 0 || id >= int32_t(pieces_.size()))
      fail("sentencepiece tokenizer: cannot decode unknown token id " + std::to_string(id) +
           " at position " + std::to_string(i) + " (vocab size " + std::to_string(pieces_.size()) + ")");
    if (id < kFirstByteToken) {  // control tokens have no text
      if (id == kBos) at_start = true;
      continue;
    }
    std::string_view piece = pieces_[id];
    std::string byte;
    if (id < kFirstByteToken + 256) {
      byte.assign(1, char(id - kFirstByteToken));
      piece = byte;
    }
    if (at_start && !piece.empty() && piece[0] == ' ') piece.remove_prefix(1);
    at_start = false;
    out += piece;
  }
  return out;
}

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
  std::vector<std::string> pieces;
  std::vector<float> scores;
  while (pos < content.size()) {
    size_t id = pieces.size();
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
    pieces.push_back(std::move(piece));
    scores.push_back(score);
  }
  return std::make_unique<SentencePieceTokenizer>(std::move(pieces), std::move(scores), name);
}

}  // namespace mt
