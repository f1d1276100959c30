// meshtrain generate --model DIR [--adapter DIR] --prompt STR: sample text with a KV cache.
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/generation_args.h"
#include "data/chat_templates.h"
#include "data/examples.h"

namespace mt::cli {

namespace {

// The prompt as the fine-tuning data rendered it: a user message (after the system message, when
// one is given) in a chat template (which puts in its own BOS), else BOS (when the tokenizer has
// one) and the text or Alpaca prompt.
std::vector<int32_t> prompt_ids(const Generator& g, const GenerationArgs& args, const std::string& text) {
  if (g.chat()) {
    std::vector<ChatMessage> messages;
    if (args.has_system()) messages.push_back({"system", args.system});
    messages.push_back({"user", text});
    return g.conversation_prompt(messages);
  }
  std::vector<int32_t> ids;
  if (g.tok->bos_id() >= 0) ids.push_back(g.tok->bos_id());
  for (int32_t id : g.tok->encode(g.format == "alpaca" ? alpaca_prompt(text, "") : text)) ids.push_back(id);
  return ids;
}

}  // namespace

Action add_generate_command(CLI::App& app) {
  struct Options {
    GenerationArgs args;
    std::string prompt;
  };
  auto o = std::make_shared<Options>();
  auto* sub = app.add_subcommand("generate", "Generate text from a model (and adapter)");
  sub->add_option("--prompt,-p", o->prompt,
                  "prompt text; BOS is added when the tokenizer has one (default: empty, start from BOS)");
  o->args.add_to(sub);
  return [o] {
    Generator g = load_generator(o->args, "generate", "none", false);
    const std::vector<int32_t> prompt = prompt_ids(g, o->args, o->prompt);
    if (o->args.verbose)
      std::cerr << "generate: prompt of " << prompt.size() << " tokens: " << ids_text(prompt) << "\n";
    const Generated r = stream_generation(g, prompt, std::cout, true);
    std::cout << std::endl;
    if (o->args.verbose) std::cerr << "generate: " << stop_reason(g, r, prompt.size()) << "\n";
    return 0;
  };
}

}  // namespace mt::cli
