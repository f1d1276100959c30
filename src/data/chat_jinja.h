// Conversations rendered by a model's own chat_template (tokenizer_config.json's Jinja, or the
// user's data.chat_template file), run by meshtrain's interpreter (data/jinja/template.h).
//
// Special tokens: the rendered text becomes ids as HF tokenizes it, except that a special token's
// text becomes its id only where every byte of it was written by the template (its literals,
// bos_token, eos_token), never where it came from a message, so data cannot inject control tokens.
// Trained tokens: where the template marks {% generation %} blocks, what they write. Otherwise each
// assistant message's turn as the template's own structure shows it: from the end of the rendering
// of the messages before it with add_generation_prompt (what a model is prompted with) to the last
// byte read from the message, then on through the template's text to the first end-of-turn token
// it writes (<|im_end|>, <|eot_id|>, <end_of_turn>, eos_token, ...).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "data/examples.h"

namespace mt {
namespace jinja {
class Template;
}

// The text of a user's chat template file (data.chat_template): a .jinja file's text, or a
// tokenizer_config.json's "chat_template" string. mt::Error naming the path when it cannot be read.
std::string read_chat_template_file(const std::string& path);
// Sets `jinja` as the "chat_template" of dir/tokenizer_config.json (written when missing), so that a
// model saved with a run's data.chat_template is prompted with it (generate reads it from there).
// Returns the file's path.
std::string write_chat_template_beside(const std::string& dir, const std::string& jinja);
// The tokenizer's chat_template parsed (cached by its text); nullptr when it has none or when the
// interpreter cannot run it, then *unsupported (when given) gets the error naming the construct.
std::shared_ptr<const jinja::Template> parsed_chat_template(const Tokenizer& tok, std::string* unsupported = nullptr);
// The conversation as `tmpl` renders it. Each message is its JSON object (ChatMessage::json, every
// key as the record gives it: tool_calls, tool_call_id, name, reasoning_content, ...) or {role,
// content}; `tools` (JSON text of a list, "" for none) is the template's `tools`; bos_token and
// eos_token are tokenizer_config.json's strings (Tokenizer::config_eos_token; else the text of the
// tokenizer's BOS and EOS ids); strftime_now the current time (UTC). mt::Error when the template refuses the conversation
// (raise_exception) or fails while running, or a message's JSON or `tools` is malformed.
Example render_with_template(const Tokenizer& tok, const jinja::Template& tmpl, const std::vector<ChatMessage>& messages,
                             bool add_generation_prompt, const std::string& tools = "");
// The day a template that calls strftime_now renders on at `now` ("2026-12-07", UTC, as
// strftime_now), "" for one that does not: part of the token cache's key, since such a template
// (Llama 3.1's "Today Date") renders differently on another day.
std::string chat_template_day(const std::string& jinja, long long now);

}  // namespace mt
