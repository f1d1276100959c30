#include "data/chat_templates.h"

#include <algorithm>
#include <string>

#include "core/error.h"

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

// One piece of a rendered conversation: a special token, or text to encode.
struct Part {
  int32_t special = -1;
  std::string text;
  bool trained = false;
};

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
  Example encode() const {
    Example ex;
    for (size_t i = 0; i < parts_.size();) {
      if (parts_[i].special >= 0) {
        ex.tokens.push_back(parts_[i].special);
        ex.trained.push_back(parts_[i].trained ? 1 : 0);
        ++i;
        continue;
      }
      size_t end = i;
      while (end < parts_.size() && parts_[end].special < 0) ++end;
      encode_run(i, end, i > 0, ex);
      i = end;
    }
    return ex;
  }

 private:
  // Text parts [begin, end) between special tokens are encoded as one string, as HF tokenizes the
  // rendered text; a token is trained when the part it starts in (or, straddling a boundary, the
  // part it reaches into) is. The parts' token boundaries come from encoding each prefix: the ids
  // it shares with the whole run belong to the parts before.
  void encode_run(size_t begin, size_t end, bool after_special, Example& ex) const {
    std::string run;
    std::vector<size_t> starts;
    for (size_t i = begin; i < end; ++i) {
      starts.push_back(run.size());
      run += parts_[i].text;
    }
    const std::vector<int32_t> ids = tok_.encode_segment(run, after_special);
    std::vector<size_t> first_token(starts.size(), 0);
    for (size_t p = 1; p < starts.size(); ++p) {
      const std::vector<int32_t> prefix = tok_.encode_segment(std::string_view(run).substr(0, starts[p]), after_special);
      size_t k = 0;
      while (k < prefix.size() && k < ids.size() && prefix[k] == ids[k]) ++k;
      first_token[p] = std::max(k, first_token[p - 1]);
    }
    size_t part = 0;
    for (size_t t = 0; t < ids.size(); ++t) {
      while (part + 1 < first_token.size() && first_token[part + 1] <= t) ++part;
      ex.tokens.push_back(ids[t]);
      ex.trained.push_back(parts_[begin + part].trained ? 1 : 0);
    }
  }

  const Tokenizer& tok_;
  DataFormat format_;
  std::vector<Part> parts_;
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
  const auto what = chat_template_unreproduced(tok.chat_template());
  if (!what) return std::nullopt;
  return "warning: the tokenizer's chat_template writes " + *what + ", which meshtrain's built-in " +
         std::string(format_name(format)) +
         " rendering does not reproduce (meshtrain runs no Jinja): conversations are rendered without it";
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

Example render_conversation(const Tokenizer& tok, const std::vector<ChatMessage>& messages, DataFormat format) {
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
                                         DataFormat format) {
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
