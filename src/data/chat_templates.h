// Chat templates: how a conversation becomes tokens for each model family, and which template a
// tokenizer's model was trained with.
//
// A tokenizer with a chat_template (its tokenizer_config.json's, or the user's data.chat_template
// file) renders conversations in its family's format with that template, run by meshtrain's Jinja
// interpreter (data/jinja/template.h) as transformers runs it; special tokens and the trained
// (assistant) tokens are found from the rendering (data/chat_jinja.h). The built-in renderings
// below are the fallback: for a tokenizer without a template, for a format other than its
// template's family, and for a model's template that uses what the interpreter lacks (then
// chat_template_warning names the construct). Each reproduces what that family's Hugging Face
// chat_template renders for plain user/assistant conversations:
//   chat     Llama 3.1:  <|begin_of_text|> then <|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>
//   chatml   Qwen:       <|im_start|>{role}\n{content}<|im_end|>\n; where the tokenizer's own template is
//                        Qwen3's (it writes <think>), a final answer starts with "<think>\n\n</think>\n\n";
//                        where it writes a default system prompt (Qwen2.5's), a conversation without
//                        a system message starts with it
//   gemma    Gemma 3:    <bos> then <start_of_turn>{user|model}\n{content, trimmed}<end_of_turn>\n, a system
//                        message becoming the start of the first user turn ("{system}\n\n")
//   mistral  Mistral v0.3: <s> then [INST] {user}[/INST] per user turn and " {assistant, trimmed}</s>" per
//                        answer, a system message put before the last user message ("{system}\n\n{user}")
// Special tokens are ids; the text between them is encoded as it would be in the rendered string (so a
// conversation gives the same ids as tokenizing HF's rendering), but text from the data never becomes
// a special token. Only the assistant turns are trained: their text and the token that closes them.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/examples.h"

namespace mt {

// The chat template whose text `jinja` (a tokenizer_config.json chat_template) renders, recognised
// by the special tokens it writes; nullopt for none of the four.
std::optional<DataFormat> chat_format_of_jinja(std::string_view jinja);
// The system prompt a ChatML template writes when a conversation opens without a system message:
// the text of a string literal '<|im_start|>system\n{text}<|im_end|>' in `jinja` (Qwen2.5's "You are
// Qwen, created by Alibaba Cloud. You are a helpful assistant.", Qwen2's "You are a helpful
// assistant."), its escapes undone. nullopt when every system turn it writes is messages[0]'s
// (Qwen3's). The chatml rendering inserts it, untrained, as HF's rendering does.
std::optional<std::string> chatml_default_system(std::string_view jinja);
// What the built-in rendering of `jinja`'s family does not reproduce, in a phrase for a one-line
// warning (a default system turn it cannot read, Llama 3.1's date lines); nullopt when nothing
// meshtrain knows of (for a template the built-in rendering stands in for: one of another family than
// the data's format, or one the interpreter cannot run). A search for known constructs, not a proof.
std::optional<std::string> chat_template_unreproduced(std::string_view jinja);
// The one "warning: ..." line for conversations rendered in `format` with this tokenizer, naming
// what its chat_template writes that the rendering leaves out; nullopt when nothing is (or `format`
// is not a chat template). The run's log and generate say it once.
std::optional<std::string> chat_template_warning(const Tokenizer& tok, DataFormat format);
// The template for conversations with this tokenizer: its tokenizer_config.json chat_template when
// one was found beside it and recognised, else the first family whose special tokens it has, else
// kChat (whose rendering then names the missing tokens).
DataFormat default_chat_format(const Tokenizer& tok);
// mt::Error in one line naming the template and the special token the tokenizer lacks.
void require_chat_tokens(const Tokenizer& tok, DataFormat format);

// Gemma's and Mistral's templates refuse (raise_exception) anything but user/assistant turns
// alternating from a user turn after an optional first system message: why these messages are
// refused by `format`, or nullopt.
std::optional<std::string> chat_roles_problem(const std::vector<ChatMessage>& messages, DataFormat format);
// A conversation in `format` (kChat, kChatml, kGemma or kMistral); `tools` is the record's tools
// list as JSON text ("" for none), the template's `tools` variable. mt::Error when the tokenizer
// lacks the template's special tokens, or (gemma, mistral) when the roles after an optional first
// system message do not alternate user/assistant starting with user, as those templates require;
// and when a built-in rendering (no model template runs) is given what it cannot write: tools, a
// tool message, tool_calls or reasoning_content (builtin_chat_problem).
Example render_conversation(const Tokenizer& tok, const std::vector<ChatMessage>& messages, DataFormat format,
                            const std::string& tools = "");
// The conversation, then what opens an assistant turn (HF's add_generation_prompt): the prompt a
// model fine-tuned on such data continues with its answer.
std::vector<int32_t> conversation_prompt(const Tokenizer& tok, const std::vector<ChatMessage>& messages,
                                         DataFormat format, const std::string& tools = "");
// What of the conversation the built-in renderings cannot write (they know role and content only),
// in a phrase: "message 3 has tool_calls", "a tool message (message 4)", ...; nullopt for nothing.
std::optional<std::string> builtin_chat_problem(const std::vector<ChatMessage>& messages, const std::string& tools);
// The token that ends an assistant turn in `format` (<|eot_id|>, <|im_end|>, <end_of_turn>, </s>), or -1.
int32_t end_of_turn_id(const Tokenizer& tok, DataFormat format);

}  // namespace mt
