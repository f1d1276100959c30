// Prompt templates: Stanford Alpaca and the Llama 3.1 chat format (declared in examples.h); the
// other chat templates are chat_templates.cpp.
#include <string>

#include "core/error.h"
#include "data/examples.h"

namespace mt {
namespace {

void append(Example& ex, const std::vector<int32_t>& ids, bool trained) {
  ex.tokens.insert(ex.tokens.end(), ids.begin(), ids.end());
  ex.trained.insert(ex.trained.end(), ids.size(), trained ? 1 : 0);
}

void append(Example& ex, int32_t id, bool trained) {
  ex.tokens.push_back(id);
  ex.trained.push_back(trained ? 1 : 0);
}

int32_t require_special(const Tokenizer& tok, const char* text) {
  const int32_t id = tok.token_to_id(text);
  if (id < 0)
    fail("chat data needs the Llama 3 special tokens, but the " + std::string(tok.kind()) +
         " tokenizer has no " + text + " (use a Llama 3 tokenizer.model, or Alpaca data)");
  return id;
}

}  // namespace

std::string_view format_name(DataFormat f) {
  switch (f) {
    case DataFormat::kAlpaca: return "alpaca";
    case DataFormat::kChat: return "chat";
    case DataFormat::kChatml: return "chatml";
    case DataFormat::kGemma: return "gemma";
    case DataFormat::kMistral: return "mistral";
    case DataFormat::kCompletion: return "completion";
    case DataFormat::kTextRecords: return "text_records";
    case DataFormat::kAuto: break;
  }
  return "auto";
}

DataFormat parse_format(std::string_view name) {
  if (name == "auto" || name.empty()) return DataFormat::kAuto;
  for (DataFormat f : {DataFormat::kAlpaca, DataFormat::kChat, DataFormat::kChatml, DataFormat::kGemma,
                       DataFormat::kMistral, DataFormat::kCompletion, DataFormat::kTextRecords})
    if (name == format_name(f)) return f;
  // ShareGPT is a shape of chat records, not a template: the name tools such as Axolotl use for it.
  const std::string hint = name == "sharegpt"
                               ? "; ShareGPT conversations are chat records: auto reads them with the tokenizer's "
                                 "template, a template name with that one"
                               : "";
  fail("unknown data format '" + std::string(name) +
       "' (expected auto, alpaca, completion, text_records or a chat template: chat, chatml, gemma or mistral" +
       hint + ")");
}

std::string_view prompt_template_name(DataFormat f) {
  return f == DataFormat::kAlpaca || is_chat_format(f) ? format_name(f) : "none";
}

bool is_chat_format(DataFormat f) {
  return f == DataFormat::kChat || f == DataFormat::kChatml || f == DataFormat::kGemma || f == DataFormat::kMistral;
}

std::string alpaca_prompt(std::string_view instruction, std::string_view input) {
  std::string s;
  if (input.empty()) {
    s = "Below is an instruction that describes a task. Write a response that appropriately "
        "completes the request.\n\n### Instruction:\n";
    s += instruction;
  } else {
    s = "Below is an instruction that describes a task, paired with an input that provides "
        "further context. Write a response that appropriately completes the request.\n\n"
        "### Instruction:\n";
    s += instruction;
    s += "\n\n### Input:\n";
    s += input;
  }
  s += "\n\n### Response:\n";
  return s;
}

Example render_completion(const Tokenizer& tok, std::string_view prompt, std::string_view completion) {
  Example ex;
  if (tok.bos_id() >= 0) append(ex, tok.bos_id(), false);
  append(ex, tok.encode(prompt), false);
  append(ex, tok.encode(completion), true);
  // Training on EOS teaches the model to stop after the response; a tokenizer without one
  // (the byte tokenizer) has no way to say it.
  if (tok.eos_id() >= 0) append(ex, tok.eos_id(), true);
  return ex;
}

Example render_alpaca(const Tokenizer& tok, std::string_view instruction, std::string_view input,
                      std::string_view output) {
  return render_completion(tok, alpaca_prompt(instruction, input), output);
}

Example render_document(const Tokenizer& tok, std::string_view text) {
  Example ex;
  // The marks tell the model where one document ends and the next begins once they are joined.
  if (tok.bos_id() >= 0) append(ex, tok.bos_id(), true);
  append(ex, tok.encode(text), true);
  if (tok.eos_id() >= 0) append(ex, tok.eos_id(), true);
  return ex;
}

Example render_chat(const Tokenizer& tok, const std::vector<ChatMessage>& messages) {
  const int32_t begin = require_special(tok, "<|begin_of_text|>");
  const int32_t start_header = require_special(tok, "<|start_header_id|>");
  const int32_t end_header = require_special(tok, "<|end_header_id|>");
  const int32_t eot = require_special(tok, "<|eot_id|>");
  const std::vector<int32_t> blank_line = tok.encode("\n\n");
  Example ex;
  append(ex, begin, false);
  for (const ChatMessage& m : messages) {
    const bool assistant = m.role == "assistant";
    append(ex, start_header, false);
    append(ex, tok.encode(m.role), false);
    append(ex, end_header, false);
    append(ex, blank_line, false);
    append(ex, tok.encode(m.content), assistant);
    append(ex, eot, assistant);
  }
  return ex;
}

std::vector<int32_t> chat_generation_prompt(const Tokenizer& tok,
                                            const std::vector<ChatMessage>& messages) {
  std::vector<int32_t> ids = render_chat(tok, messages).tokens;
  const std::vector<int32_t> tail = render_chat(tok, {{"assistant", ""}}).tokens;
  // render_chat of an empty assistant turn is <|begin_of_text|> header "\n\n" <|eot_id|>: keep
  // the header part, drop the leading begin-of-text and the closing <|eot_id|>.
  ids.insert(ids.end(), tail.begin() + 1, tail.end() - 1);
  return ids;
}

}  // namespace mt
