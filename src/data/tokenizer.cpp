#include "data/tokenizer.h"

#include <algorithm>

namespace mt {

void Tokenizer::set_special_tokens(std::vector<Special> specials) {
  std::stable_sort(specials.begin(), specials.end(), [](const Special& a, const Special& b) {
    return a.text.size() > b.text.size();
  });
  specials_ = std::move(specials);
  by_text_.clear();
  by_id_.clear();
  std::vector<std::string> texts;
  for (size_t i = 0; i < specials_.size(); ++i) {
    by_text_.emplace(specials_[i].text, specials_[i].id);  // of equal texts, the first (as matched) wins
    by_id_.emplace(specials_[i].id, i);
    texts.push_back(specials_[i].text);
  }
  special_match_ = LongestMatch(texts);
}

int32_t Tokenizer::token_to_id(std::string_view special) const {
  auto it = by_text_.find(std::string(special));
  return it == by_text_.end() ? -1 : it->second;
}

const std::string* Tokenizer::special_text(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &specials_[it->second].text;
}

std::vector<int32_t> Tokenizer::encode_with_specials(std::string_view text) const {
  // One pass finds the longest special starting at every position (data/longest_match.h).
  const std::vector<uint32_t> longest = special_match_.longest_at_each(text);
  std::vector<int32_t> out;
  size_t plain_start = 0;
  for (size_t pos = 0; pos < text.size();) {
    if (longest[pos] == 0) {
      ++pos;
      continue;
    }
    const std::string_view hit = text.substr(pos, longest[pos]);
    auto plain = encode_part(text.substr(plain_start, pos - plain_start), plain_start != 0);
    out.insert(out.end(), plain.begin(), plain.end());
    out.push_back(by_text_.at(std::string(hit)));
    pos += hit.size();
    plain_start = pos;
  }
  auto plain = encode_part(text.substr(plain_start), plain_start != 0);
  out.insert(out.end(), plain.begin(), plain.end());
  return out;
}

}  // namespace mt
