#include "data/sentencepiece_tokenizer.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "data/merge_queue.h"
#include "data/unicode.h"

namespace mt {
namespace {

uint64_t pair_key(int32_t l, int32_t r) { return (uint64_t(uint32_t(l)) << 32) | uint32_t(r); }

size_t char_len(std::string_view s, size_t i, bool llama2c) {
  if (!llama2c) return unicode::decode_utf8(s, i).len;
  size_t j = i + 1;
  while (j < s.size() && j - i < 4 && (static_cast<unsigned char>(s[j]) & 0xC0) == 0x80) ++j;
  return j - i;
}

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(Vocab vocab, const std::string& source)
    : v_(std::move(vocab)) {
  const size_t n = v_.pieces.size();
  if (n == 0 || v_.scores.size() != n || v_.types.size() != n)
    fail(source + ": sentencepiece vocabulary needs a piece, a score and a type per id");
  if (v_.space.empty()) fail(source + ": empty space symbol");
  std::fill(std::begin(byte_ids_), std::end(byte_ids_), -1);
  std::vector<Special> specials;
  std::unordered_map<std::string, int32_t> any_id;  // every piece, for resolving HF merges
  byte_of_.assign(n, 0);
  for (size_t id = 0; id < n; ++id) {
    any_id.emplace(v_.pieces[id], int32_t(id));
    const std::string& p = v_.pieces[id];
    switch (v_.types[id]) {
      case PieceType::byte: {
        unsigned b = 0;
        char end = 0;
        if (p.size() != 6 || std::sscanf(p.c_str(), "<0x%2X%c", &b, &end) != 2 || end != '>')
          fail(source + ": byte piece " + std::to_string(id) + " '" + p + "' is not <0xXX>");
        if (byte_ids_[b] < 0) byte_ids_[b] = int32_t(id);
        byte_of_[id] = uint8_t(b);
        break;
      }
      case PieceType::control:
      case PieceType::unknown:
        if (!p.empty()) specials.push_back({p, int32_t(id)});
        break;
      case PieceType::user_defined:
        if (p.empty()) fail(source + ": empty user-defined piece " + std::to_string(id));
        user_defined_.push_back(p);
        [[fallthrough]];
      case PieceType::normal:
        normal_ids_.emplace(p, int32_t(id));  // the first of duplicate pieces wins
        break;
    }
  }
  for (int b = 0; b < 256; ++b)
    if (byte_ids_[b] < 0) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      fail(source + ": no byte piece " + name + " (byte fallback needs all 256)");
    }
  for (int32_t id : {v_.unk, v_.bos, v_.eos})
    if (id < -1 || id >= int32_t(n))
      fail(source + ": special token id " + std::to_string(id) + " is outside the vocabulary");
  user_defined_match_ = LongestMatch(user_defined_);
  for (size_t rank = 0; rank < v_.merges.size(); ++rank) {
    const auto& [a, b] = v_.merges[rank];
    auto ia = any_id.find(a), ib = any_id.find(b), iab = any_id.find(a + b);
    if (ia == any_id.end() || ib == any_id.end() || iab == any_id.end())
      fail(source + ": merge " + std::to_string(rank) + " '" + a + " " + b +
           "' uses or produces a piece that is not in the vocab");
    merge_table_.emplace(pair_key(ia->second, ib->second), Merge{int32_t(rank), iab->second});  // an earlier merge wins
  }
  set_special_tokens(std::move(specials));
}

int32_t SentencePieceTokenizer::lookup(std::string_view s) const {
  auto it = normal_ids_.find(std::string(s));
  return it == normal_ids_.end() ? -1 : it->second;
}

std::string SentencePieceTokenizer::normalize(std::string_view text, bool after_special,
                                              size_t& prefix_len) const {
  std::string t;
  if (v_.remove_extra_whitespaces) {
    // sentencepiece: leading spaces dropped, runs of spaces become one; trailing space symbols
    // (spaces, a literal U+2581, even the dummy prefix) go after escaping, below.
    size_t i = text.find_first_not_of(' ');
    for (bool prev_space = false; i < text.size(); ++i) {
      if (text[i] == ' ' && prev_space) continue;
      t += text[i];
      prev_space = text[i] == ' ';
    }
  } else {
    t.assign(text);
  }
  prefix_len = 0;
  if (t.empty()) return t;
  std::string out;
  out.reserve(t.size() + t.size() / 4 + 3);
  bool starts_with_space = t[0] == ' ' || t.compare(0, v_.space.size(), v_.space) == 0;
  if (v_.add_dummy_prefix && !(v_.prefix_only_if_absent && starts_with_space) &&
      !(v_.prefix_first_only && after_special)) {
    out += v_.space;
    prefix_len = v_.space.size();
  }
  for (char c : t) {
    if (c == ' ') out += v_.space;
    else out += c;
  }
  if (v_.remove_extra_whitespaces)
    while (out.size() >= v_.space.size() && out.compare(out.size() - v_.space.size(), v_.space.size(), v_.space) == 0)
      out.resize(out.size() - v_.space.size());
  prefix_len = std::min(prefix_len, out.size());
  return out;
}

std::vector<int32_t> SentencePieceTokenizer::encode_part(std::string_view text, bool after_special) const {
  std::vector<int32_t> ids;
  if (!v_.added_tokens_first || user_defined_.empty()) {
    encode_normalized(text, after_special, ids);
    return ids;
  }
  const std::vector<uint32_t> longest = user_defined_match_.longest_at_each(text);
  size_t plain = 0;
  for (size_t i = 0; i < text.size();) {
    if (longest[i] == 0) {
      i += char_len(text, i, v_.llama2c_chars);
      continue;
    }
    encode_normalized(text.substr(plain, i - plain), after_special || plain != 0, ids);
    ids.push_back(lookup(text.substr(i, longest[i])));
    i += longest[i];
    plain = i;
  }
  encode_normalized(text.substr(plain), after_special || plain != 0, ids);
  return ids;
}

void SentencePieceTokenizer::encode_normalized(std::string_view text, bool after_special,
                                               std::vector<int32_t>& ids) const {
  size_t prefix_len = 0;
  const std::string norm = normalize(text, after_special, prefix_len);
  if (!v_.split_at_space) {
    encode_word(norm, prefix_len, ids);
    return;
  }
  // HF Metaspace split: each space symbol begins a new word (it is merged with what follows).
  std::string_view rest = norm;
  while (!rest.empty()) {
    size_t next = rest.find(v_.space, rest.compare(0, v_.space.size(), v_.space) == 0 ? v_.space.size() : 0);
    if (next == std::string_view::npos) next = rest.size();
    encode_word(rest.substr(0, next), rest.size() == norm.size() ? prefix_len : 0, ids);
    rest.remove_prefix(next);
  }
}

void SentencePieceTokenizer::encode_word(std::string_view word, size_t prefix_len,
                                         std::vector<int32_t>& out) const {
  // User-defined pieces are whole symbols that never merge with their neighbours, so the text
  // between them is encoded on its own.
  size_t plain = 0;
  const bool match = !user_defined_.empty() && !v_.added_tokens_first;
  const std::vector<uint32_t> longest = match ? user_defined_match_.longest_at_each(word) : std::vector<uint32_t>{};
  for (size_t i = prefix_len; i < word.size() && match;) {
    if (longest[i] == 0) {
      i += char_len(word, i, v_.llama2c_chars);
      continue;
    }
    encode_chars(word.substr(plain, i - plain), plain == 0 ? prefix_len : 0, out);
    out.push_back(lookup(word.substr(i, longest[i])));
    i += longest[i];
    plain = i;
  }
  encode_chars(word.substr(plain), plain == 0 ? prefix_len : 0, out);
}

void SentencePieceTokenizer::encode_chars(std::string_view text, size_t prefix_len,
                                          std::vector<int32_t>& out) const {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < text.size();) {
    // The dummy prefix is a character of its own even where llama2.c's grouping would join
    // continuation bytes to it.
    size_t len = i == 0 && prefix_len ? prefix_len : char_len(text, i, v_.llama2c_chars);
    int32_t id = lookup(text.substr(i, len));
    if (id >= 0) {
      ids.push_back(id);
    } else {
      // Byte fallback before merging, as llama2.c and HF do. sentencepiece falls back after
      // merging, which gives the same ids: a character that is not a piece is in no piece of a
      // trained BPE vocabulary, so it never merges.
      for (size_t k = i; k < i + len; ++k) ids.push_back(byte_ids_[static_cast<unsigned char>(text[k])]);
    }
    i += len;
  }
  if (!v_.merges.empty()) {
    merge_adjacent_pairs<int32_t>(ids, [&](int32_t l, int32_t r) -> std::optional<PairMerge<int32_t>> {
      auto it = merge_table_.find(pair_key(l, r));
      if (it == merge_table_.end()) return std::nullopt;
      return PairMerge<int32_t>{it->second.rank, it->second.id};
    });
  } else {
    std::string joined;
    // Highest score first: the priority is the negated score, smaller merges first.
    merge_adjacent_pairs<float>(ids, [&](int32_t l, int32_t r) -> std::optional<PairMerge<float>> {
      if (v_.types[l] == PieceType::byte || v_.types[r] == PieceType::byte) return std::nullopt;
      joined.assign(v_.pieces[l]);
      joined += v_.pieces[r];
      int32_t id = lookup(joined);
      if (id < 0) return std::nullopt;
      return PairMerge<float>{-v_.scores[id], id};
    });
  }
  out.insert(out.end(), ids.begin(), ids.end());
}

std::string SentencePieceTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  bool at_start = true;  // the next piece carries the dummy-prefix space
  for (size_t i = 0; i < ids.size(); ++i) {
    int32_t id = ids[i];
    if (id < 0 || id >= int32_t(v_.pieces.size()))
      fail("sentencepiece tokenizer: cannot decode unknown token id " + std::to_string(id) +
           " at position " + std::to_string(i) + " (vocab size " + std::to_string(v_.pieces.size()) + ")");
    switch (v_.types[id]) {
      case PieceType::control:
      case PieceType::unknown:  // no text
        if (id == v_.bos) at_start = true;
        continue;
      case PieceType::byte:
        out += char(byte_of_[id]);
        break;
      case PieceType::normal:
      case PieceType::user_defined: {
        std::string_view piece = v_.pieces[id];
        if (at_start && (v_.add_dummy_prefix || v_.remove_extra_whitespaces) && piece.substr(0, v_.space.size()) == v_.space)
          piece.remove_prefix(v_.space.size());
        // sentencepiece keeps dropping leading space pieces while the text is still empty when it
        // squeezes whitespace (such text cannot start with a space).
        if (piece.empty() && v_.remove_extra_whitespaces) continue;
        for (size_t k = 0; k < piece.size();) {
          if (piece.compare(k, v_.space.size(), v_.space) == 0) {
            out += ' ';
            k += v_.space.size();
          } else {
            out += piece[k++];
          }
        }
        break;
      }
    }
    at_start = false;
  }
  return out;
}

}  // namespace mt
