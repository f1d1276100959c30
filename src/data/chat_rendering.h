// How a rendered conversation becomes token ids: pieces that are special tokens (ids the template
// wrote) or text, each trained or not. Shared by the built-in templates (chat_templates.cpp) and
// the models' own Jinja templates (chat_jinja.cpp).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/examples.h"

namespace mt {

struct ChatPart {
  int32_t special = -1;  // a special token's id, or -1 for text
  std::string text;
  bool trained = false;
};

// The ids of `parts`. Text parts between special tokens are encoded as one string, as HF tokenizes
// the rendered text (text after a special token as such: Tokenizer::encode_segment); a token is
// trained when the part it starts in (or, straddling a boundary, the part it reaches into) is.
Example encode_chat_parts(const Tokenizer& tok, const std::vector<ChatPart>& parts);

}  // namespace mt
