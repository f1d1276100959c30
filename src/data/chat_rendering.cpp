#include "data/chat_rendering.h"

#include <algorithm>
#include <string_view>

namespace mt {
namespace {

// Text parts [begin, end) between special tokens are encoded as one string. The parts' token
// boundaries come from encoding each prefix: the ids it shares with the whole run belong to the
// parts before.
void encode_run(const Tokenizer& tok, const std::vector<ChatPart>& parts, size_t begin, size_t end,
                bool after_special, Example& ex) {
  std::string run;
  std::vector<size_t> starts;
  for (size_t i = begin; i < end; ++i) {
    starts.push_back(run.size());
    run += parts[i].text;
  }
  const std::vector<int32_t> ids = tok.encode_segment(run, after_special);
  std::vector<size_t> first_token(starts.size(), 0);
  for (size_t p = 1; p < starts.size(); ++p) {
    const std::vector<int32_t> prefix = tok.encode_segment(std::string_view(run).substr(0, starts[p]), after_special);
    size_t k = 0;
    while (k < prefix.size() && k < ids.size() && prefix[k] == ids[k]) ++k;
    first_token[p] = std::max(k, first_token[p - 1]);
  }
  size_t part = 0;
  for (size_t t = 0; t < ids.size(); ++t) {
    while (part + 1 < first_token.size() && first_token[part + 1] <= t) ++part;
    ex.tokens.push_back(ids[t]);
    ex.trained.push_back(parts[begin + part].trained ? 1 : 0);
  }
}

}  // namespace

Example encode_chat_parts(const Tokenizer& tok, const std::vector<ChatPart>& parts) {
  Example ex;
  for (size_t i = 0; i < parts.size();) {
    if (parts[i].special >= 0) {
      ex.tokens.push_back(parts[i].special);
      ex.trained.push_back(parts[i].trained ? 1 : 0);
      ++i;
      continue;
    }
    size_t end = i;
    while (end < parts.size() && parts[end].special < 0) ++end;
    encode_run(tok, parts, i, end, i > 0, ex);
    i = end;
  }
  return ex;
}

}  // namespace mt
