// The chat template a merged export records in its tokenizer_config.json: the one the adapter was
// trained with (io/adapter_template.h), so that transformers' apply_chat_template, vLLM and
// llama.cpp's converters render conversations the way the merged model learned them.
#pragma once
#include <string>

#include "data/tokenizer.h"

namespace mt::cli {

// What goes into the merged directory's chat_template: for an adapter trained with a chat template
// (`trained`, its recorded name), the tokenizer's own chat_template when it is of that family,
// else meshtrain's Jinja for the built-in template (builtin_template_jinja); with no chat template
// trained (no adapter, or plain or Alpaca data), the tokenizer's own; `trained_jinja`, the text an
// adapter trained with a user's template recorded (read_adapter_chat_template), before all of these.
// "" when there is none. `source` is set to a phrase saying where the text came from.
std::string export_chat_template(const std::string& trained, const std::string& trained_jinja, const Tokenizer* tok,
                                 std::string& source);

// Sets "chat_template" in <dir>/tokenizer_config.json to `jinja` (creating a file of that one key
// when the tokenizer brought none), keeping its other keys in their order. Returns the path
// written, or "" when the file already held that template.
std::string record_chat_template(const std::string& dir, const std::string& jinja);

}  // namespace mt::cli
