// What `generate` and `chat` share: the options (model, device, template, system message,
// sampling), loading the model with the template it was trained with, the ids that end an answer,
// and printing tokens as they are produced. One file so that the two verbs cannot drift apart.
#pragma once
#include <CLI/CLI.hpp>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend_factory.h"
#include "cli/device_option.h"
#include "cli/model_args.h"
#include "data/chat_templates.h"
#include "data/examples.h"
#include "model/generate.h"

namespace mt::cli {

struct GenerationArgs {
  ModelArgs model;
  DeviceOption device;
  std::string format;  // --template; "": the adapter's recorded template, else the verb's default
  std::string system;  // --system: a system message before the user's
  CLI::Option* system_option = nullptr;
  bool verbose = false;
  GenerateOptions gen;

  // The options both verbs take (all but generate's --prompt).
  void add_to(CLI::App* sub);
  bool has_system() const { return system_option && system_option->count() > 0; }
};

// A token that ends generation, and why it does (for --verbose and messages).
struct StopToken {
  int32_t id;
  std::string why;
};

// The loaded model and tokenizer and what generating with them needs.
struct Generator {
  DeviceBackend backend;
  std::unique_ptr<Transformer> model;
  std::unique_ptr<Tokenizer> tok;
  std::string format;  // resolved: "none", "alpaca", or a chat template's name
  std::vector<StopToken> stops;
  GenerateOptions gen;  // the options given, with the stop ids

  bool chat() const { return format != "none" && format != "alpaca"; }
  int64_t context() const;  // the model's max_position_embeddings
  // The prompt that asks for the next assistant turn of `messages` (the system message first when
  // there is one): the chat template's generation prompt.
  std::vector<int32_t> conversation_prompt(const std::vector<ChatMessage>& messages) const;
};

// Checks the options, opens the device, then (after work_gate::reached(verb)) loads the model and
// tokenizer, resolves the template (--template, else the adapter's recorded one, else
// `default_format`) and collects the stop ids: EOS, BOS, <|eot_id|>, the template's end of turn,
// generation_config.json's eos_token_id (an id or a list) and tokenizer_config.json's eos_token.
// `verb` names the command in messages. mt::Error for --system with a template without a system
// message (none, alpaca), and (`needs_chat`) for a template that is not a chat template.
Generator load_generator(const GenerationArgs& args, const char* verb, const std::string& default_format,
                         bool needs_chat);

// What one generation produced and why it ended.
struct Generated {
  std::vector<int32_t> tokens;
  int32_t stop_id = -1;  // the stop token produced (not in tokens), or -1: -n or the context ended it
};

// Generates after `prompt`, writing the text to `out` as it is produced: the decoded prompt first
// when `echo_prompt` (generate prints it; chat does not), then each new piece. Text is decoded
// whole each time and the new suffix printed, since one token can complete a multi-byte character
// started by the one before.
Generated stream_generation(Generator& g, const std::vector<int32_t>& prompt, std::ostream& out, bool echo_prompt);

// "stopped at id 7 \"<|im_end|>\" (the chatml template's end of turn)", "stopped after -n 40
// tokens", or "stopped at the end of the model's context (512 tokens)": for --verbose.
std::string stop_reason(const Generator& g, const Generated& r, size_t prompt_tokens);

// The ids as text for --verbose: "[1, 2, 3]".
std::string ids_text(const std::vector<int32_t>& ids);

}  // namespace mt::cli
