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
  for (size_t i = 0; i < specials_.size(); ++i) {
    by_text_.emplace(specials_[i].text, specials_[i].id);
    by_id_.emplace(specials_[i].id, i);
  }
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
  // Only positions whose byte starts some special need the (longest-first) comparison.
  bool first_byte[256] = {};
  for (const auto& s : specials_)
    if (!s.text.empty()) first_byte[static_cast<unsigned char>(s.text[0])] = true;
  std::vector<int32_t> out;
  size_t plain_start = 0;
  for (size_t pos = 0; pos < text.size();) {
    const Special* hit = nullptr;
    if (first_byte[static_cast<unsigned char>(text[pos])])
      for (const auto& s : specials_)
        if (!s.text.empty() && text.substr(pos, s.text.size()) == s.text) {
          hit = &s;
          break;
        }
    if (!hit) {
      ++pos;
      continue;
    }
    auto plain = encode_part(text.substr(plain_start, pos - plain_start), plain_start != 0);
    out.insert(out.end(), plain.begin(), plain.end());
    out.push_back(hit->id);
    pos += hit->text.size();
    plain_start = pos;
  }
  auto plain = encode_part(text.substr(plain_start), plain_start != 0);
  out.insert(out.end(), plain.begin(), plain.end());
  return out;
}

}  // namespace mt
