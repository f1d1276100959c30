#include "data/chat_templates.h"

#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include "core/bounded_json.h"
#include "core/error.h"
#include "data/chat_jinja.h"
#include "data/chat_rendering.h"

namespace mt {
namespace {

// The special tokens a template writes, the first two of which identify its family.
struct Family {
  DataFormat format;
  std::vector<const char*> specials;
};
const Family kFamilies[] = {
    {DataFormat::kChatml, {"<|im_start|>", "<|im_end|>"}},
    {DataFormat::kGemma, {"<start_of_turn>", "<end_of_turn>", "<bos>"}},
    {DataFormat::kMistral, {"[INST]", "[/INST]", "<s>", "</s>"}},
    {DataFormat::kChat, {"<|start_header_id|>", "<|end_header_id|>", "<|begin_of_text|>", "<|eot_id|>"}},
};

// "the chatml chat template", for messages.
std::string template_named(DataFormat format) {
  std::string s = "the ";
  s += format_name(format);
  return s + " chat template";
}

const Family& family_of(DataFormat format) {
  for (const Family& f : kFamilies)
    if (f.format == format) return f;
  // Built with += : "literal" + std::string here trips a false -Wrestrict in g++ 12.
  std::string msg = "'";
  msg += format_name(format);
  fail(msg + "' is not a chat template (expected chat, chatml, gemma or mistral)");
}

// The tokenizer's own chat_template, when it renders conversations in `format`: a template of
// that family (by the special tokens it writes), or of none of the four when `format` is the one
// chosen for the tokenizer. nullptr when there is none or it uses what the interpreter lacks
// (chat_template_warning names it; the built-in rendering is used).
std::shared_ptr<const jinja::Template> own_template(const Tokenizer& tok, DataFormat format,
                                                    std::string* unsupported = nullptr) {
  if (tok.chat_template().empty() || !is_chat_format(format)) return nullptr;
  const auto family = chat_format_of_jinja(tok.chat_template());
  if (family ? *family != format : format != default_chat_format(tok)) return nullptr;
  return parsed_chat_template(tok, unsupported);
}

class Rendering {
 public:
  explicit Rendering(const Tokenizer& tok, DataFormat format) : tok_(tok), format_(format) {}
  void special(const char* text, bool trained = false) {
    const int32_t id = tok_.token_to_id(text);
    if (id < 0) require_chat_tokens(tok_, format_);  // names the first missing one
    parts_.push_back({id, "", trained});
  }
  // An added token the template writes where the tokenizer has it, else its text.
  void special_or_text(const char* s, bool trained) {
    if (tok_.token_to_id(s) >= 0) special(s, trained);
    else text(s, trained);
  }
  void text(std::string s, bool trained = false) {
    if (!s.empty()) parts_.push_back({-1, std::move(s), trained});
  }
  Example encode() const { return encode_chat_parts(tok_, parts_); }

 private:
  const Tokenizer& tok_;
  DataFormat format_;
  std::vector<ChatPart> parts_;
};

// Jinja's `trim`: Python's str.strip() of whitespace (ASCII whitespace here).
std::string trimmed(const std::string& s) {
  const char* ws = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

void require_alternating(const std::vector<ChatMessage>& messages, DataFormat format) {
  if (auto why = chat_roles_problem(messages, format)) fail(*why);
}

// What a ChatML tokenizer's own template adds to the plain turns.
struct ChatmlStyle {
  // Qwen3's template (its Jinja writes <think>) opens the last message, when it is an answer after
  // the last user message, with an empty reasoning block: "<think>\n\n</think>\n\n". It is part
  // of the answer, so trained. Qwen2.5's and other ChatML templates write the answer alone.
  bool empty_think_block = false;
  // The system turn written when the conversation opens without one (Qwen2.5's), untrained.
  std::optional<std::string> default_system;
};

ChatmlStyle chatml_style(const Tokenizer& tok) {
  return {tok.chat_template().find("<think>") != std::string::npos, chatml_default_system(tok.chat_template())};
}

void render_chatml(Rendering& r, const std::vector<ChatMessage>& messages, const ChatmlStyle& style) {
  if (style.default_system && (messages.empty() || messages[0].role != "system")) {
    r.special("<|im_start|>");
    r.text("system\n" + *style.default_system);
    r.special("<|im_end|>");
    r.text("\n");
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const bool assistant = m.role == "assistant";
    r.special("<|im_start|>");
    r.text(m.role + "\n");
    if (assistant && style.empty_think_block && i + 1 == messages.size()) {
      // Qwen3 has <think> and </think> as added tokens; HF's tokenization of the text finds them.
      r.special_or_text("<think>", true);
      r.text("\n\n", true);
      r.special_or_text("</think>", true);
      r.text("\n\n", true);
    }
    r.text(m.content, assistant);
    r.special("<|im_end|>", assistant);
    r.text("\n");
  }
}

void render_gemma(Rendering& r, const std::vector<ChatMessage>& messages, bool open_turn) {
  require_alternating(messages, DataFormat::kGemma);
  const bool has_system = !messages.empty() && messages[0].role == "system";
  r.special("<bos>");
  for (size_t i = has_system ? 1 : 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const bool assistant = m.role == "assistant";
    r.special("<start_of_turn>");
    // The system message is not trimmed: the template adds it as it is.
    r.text((assistant ? "model" : m.role) + "\n" + (has_system && i == 1 ? messages[0].content + "\n\n" : ""));
    r.text(trimmed(m.content), assistant);
    r.special("<end_of_turn>", assistant);
    r.text("\n");
  }
  if (open_turn) {
    r.special("<start_of_turn>");
    r.text("model\n");
  }
}

void render_mistral(Rendering& r, const std::vector<ChatMessage>& messages) {
  require_alternating(messages, DataFormat::kMistral);
  const bool has_system = !messages.empty() && messages[0].role == "system";
  size_t last_user = 0;
  for (size_t i = 0; i < messages.size(); ++i)
    if (messages[i].role == "user") last_user = i;
  r.special("<s>");
  for (size_t i = has_system ? 1 : 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user") {
      r.special("[INST]");
      // Built with += : " " + std::string here trips a false -Wrestrict in g++ 12.
      std::string turn = " ";
      if (has_system && i == last_user) turn += messages[0].content + "\n\n";
      r.text(turn + m.content);
      r.special("[/INST]");
    } else {
      std::string answer = " ";
      r.text(answer + trimmed(m.content), true);
      r.special("</s>", true);
    }
  }
}

// A character after a backslash in a Jinja string literal (Python's escapes).
char unescaped(char c) {
  switch (c) {
    case 'n': return '\n';
    case 't': return '\t';
    case 'r': return '\r';
    default: return c;  // a quote or a backslash, as itself
  }
}

}  // namespace

std::optional<std::string> chatml_default_system(std::string_view jinja) {
  constexpr std::string_view open = "<|im_start|>system", close = "<|im_end|>";
  for (size_t at = jinja.find(open); at != std::string_view::npos; at = jinja.find(open, at + 1)) {
    // A system turn written by one string literal: its quote just before the token.
    const char quote = at > 0 ? jinja[at - 1] : 0;
    if (quote != '\'' && quote != '"') continue;
    size_t i = at + open.size();
    if (jinja.substr(i, 2) == "\\n") i += 2;
    else if (i < jinja.size() && jinja[i] == '\n') i += 1;
    else continue;
    std::string text;
    for (; i < jinja.size() && jinja[i] != quote; ++i) {
      if (jinja.substr(i, close.size()) == close) return text;
      text += jinja[i] == '\\' && i + 1 < jinja.size() ? unescaped(jinja[++i]) : jinja[i];
    }
    // The literal ended before <|im_end|>: the turn's text comes from elsewhere (messages[0]).
  }
  return std::nullopt;
}

std::optional<std::string> chat_template_unreproduced(std::string_view jinja) {
  if (jinja.find("Cutting Knowledge Date") != std::string_view::npos)
    return "date lines in the system turn (\"Cutting Knowledge Date: ...\", Llama 3.1's)";
  const bool defaults_system = jinja.find("!= 'system'") != std::string_view::npos ||
                               jinja.find("!= \"system\"") != std::string_view::npos;
  if (defaults_system && chat_format_of_jinja(jinja) == DataFormat::kChatml && !chatml_default_system(jinja))
    return "a system turn of its own when a conversation has none, not as one string literal meshtrain can read";
  if (defaults_system && chat_format_of_jinja(jinja) != DataFormat::kChatml)
    return "a system turn of its own when a conversation has none (meshtrain reproduces that for ChatML templates only)";
  return std::nullopt;
}

std::optional<std::string> chat_template_warning(const Tokenizer& tok, DataFormat format) {
  if (!is_chat_format(format)) return std::nullopt;
  std::string unsupported;
  if (own_template(tok, format, &unsupported)) return std::nullopt;  // it runs as the model defines it
  if (!unsupported.empty())
    return "warning: the tokenizer's chat_template uses what meshtrain's Jinja interpreter lacks (" + unsupported +
           "): conversations are rendered with meshtrain's built-in " + std::string(format_name(format)) + " template";
  const auto what = chat_template_unreproduced(tok.chat_template());
  if (!what) return std::nullopt;
  return "warning: the tokenizer's chat_template writes " + *what + ", which meshtrain's built-in " +
         std::string(format_name(format)) +
         " rendering does not reproduce: conversations are rendered without it";
}

std::optional<std::string> chat_roles_problem(const std::vector<ChatMessage>& messages, DataFormat format) {
  if (format != DataFormat::kGemma && format != DataFormat::kMistral) return std::nullopt;
  const size_t first = !messages.empty() && messages[0].role == "system" ? 1 : 0;
  for (size_t i = first; i < messages.size(); ++i) {
    const char* want = (i - first) % 2 == 0 ? "user" : "assistant";
    if (messages[i].role != want)
      return template_named(format) + " needs user and assistant turns alternating, "
             "starting with user, after an optional first system message (message " + std::to_string(i + 1) +
             " is " + messages[i].role + ")";
  }
  return std::nullopt;
}

std::optional<DataFormat> chat_format_of_jinja(std::string_view jinja) {
  for (const Family& f : kFamilies)
    if (jinja.find(f.specials[0]) != std::string_view::npos) return f.format;
  return std::nullopt;
}

DataFormat default_chat_format(const Tokenizer& tok) {
  if (auto f = chat_format_of_jinja(tok.chat_template())) return *f;
  for (const Family& f : kFamilies)
    if (tok.token_to_id(f.specials[0]) >= 0 && tok.token_to_id(f.specials[1]) >= 0) return f.format;
  return DataFormat::kChat;
}

void require_chat_tokens(const Tokenizer& tok, DataFormat format) {
  for (const char* s : family_of(format).specials)
    if (tok.token_to_id(s) < 0)
      fail(template_named(format) + " needs the special token " + s + ", which the " +
           std::string(tok.kind()) + " tokenizer lacks (choose the template of the model's family, or Alpaca data)");
}

std::optional<std::string> builtin_chat_problem(const std::vector<ChatMessage>& messages, const std::string& tools) {
  if (!tools.empty()) return std::string("the record has tools");
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const std::string which = "message " + std::to_string(i + 1);
    if (m.role == "tool") return which + " is a tool message";
    if (m.json.empty()) continue;
    // Only the keys that carry text of the conversation: others (name, ids, metadata) are ignored
    // by these templates as by the families' own for plain turns.
    const nlohmann::ordered_json j = parse_ordered_json(m.json, JsonKind::data_record, which);
    for (const char* key : {"tool_calls", "reasoning_content"})
      if (j.contains(key) && !j[key].is_null()) return which + " has " + key;
    if (j.contains("content") && !j["content"].is_null() && !j["content"].is_string())
      return which + "'s content is not a string";
  }
  return std::nullopt;
}

namespace {
// The built-in renderings write role and content only: refuse, in one line, what they would drop.
void require_builtin_renders(const std::vector<ChatMessage>& messages, const std::string& tools, DataFormat format) {
  if (auto why = builtin_chat_problem(messages, tools))
    fail("meshtrain's built-in " + std::string(format_name(format)) +
         " template renders role and content only, and " + *why +
         ": tool use and reasoning need the model's own chat_template (the tokenizer's tokenizer_config.json, "
         "or data.chat_template)");
}
}  // namespace

Example render_conversation(const Tokenizer& tok, const std::vector<ChatMessage>& messages, DataFormat format,
                            const std::string& tools) {
  if (const auto own = own_template(tok, format)) {
    require_alternating(messages, format);  // gemma's and mistral's templates refuse the same, less clearly
    return render_with_template(tok, *own, messages, false, tools);
  }
  require_builtin_renders(messages, tools, format);
  if (format == DataFormat::kChat) return render_chat(tok, messages);
  require_chat_tokens(tok, format);
  Rendering r(tok, format);
  switch (format) {
    case DataFormat::kChatml: render_chatml(r, messages, chatml_style(tok)); break;
    case DataFormat::kGemma: render_gemma(r, messages, false); break;
    case DataFormat::kMistral: render_mistral(r, messages); break;
    default: family_of(format);  // fails: not a chat template
  }
  return r.encode();
}

std::vector<int32_t> conversation_prompt(const Tokenizer& tok, const std::vector<ChatMessage>& messages,
                                         DataFormat format, const std::string& tools) {
  if (const auto own = own_template(tok, format)) {
    require_alternating(messages, format);
    return render_with_template(tok, *own, messages, true, tools).tokens;
  }
  require_builtin_renders(messages, tools, format);
  if (format == DataFormat::kChat) return chat_generation_prompt(tok, messages);
  require_chat_tokens(tok, format);
  Rendering r(tok, format);
  switch (format) {
    case DataFormat::kChatml:
      render_chatml(r, messages, chatml_style(tok));
      r.special("<|im_start|>");
      r.text("assistant\n");
      break;
    case DataFormat::kGemma: render_gemma(r, messages, true); break;
    case DataFormat::kMistral: render_mistral(r, messages); break;  // ends with [/INST]
    default: family_of(format);
  }
  return r.encode().tokens;
}

int32_t end_of_turn_id(const Tokenizer& tok, DataFormat format) {
  switch (format) {
    case DataFormat::kChat: return tok.token_to_id("<|eot_id|>");
    case DataFormat::kChatml: return tok.token_to_id("<|im_end|>");
    case DataFormat::kGemma: return tok.token_to_id("<end_of_turn>");
    case DataFormat::kMistral: return tok.token_to_id("</s>");
    default: return -1;
  }
}

}  // namespace mt
