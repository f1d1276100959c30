// meshtrain generate --model DIR [--adapter DIR] --prompt STR: sample text with a KV cache.
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/count_check.h"
#include "cli/device_option.h"
#include "cli/model_args.h"
#include "core/work_gate.h"
#include "data/chat_templates.h"
#include "data/examples.h"
#include "io/adapter_template.h"
#include "model/generate.h"

namespace mt::cli {

namespace {

// The prompt as the fine-tuning data rendered it: a user message in a chat template (which puts
// in its own BOS), else BOS (when the tokenizer has one) and the text or Alpaca prompt.
std::vector<int32_t> prompt_ids(const Tokenizer& tok, const std::string& text, const std::string& format) {
  std::vector<int32_t> ids;
  if (format != "none" && format != "alpaca") return conversation_prompt(tok, {{"user", text}}, parse_format(format));
  if (tok.bos_id() >= 0) ids.push_back(tok.bos_id());
  for (int32_t id : tok.encode(format == "alpaca" ? alpaca_prompt(text, "") : text)) ids.push_back(id);
  return ids;
}

}  // namespace

Action add_generate_command(CLI::App& app) {
  struct Options {
    ModelArgs model;
    DeviceOption device;
    std::string prompt;
    std::string format;  // "": the adapter's recorded template, else none
    GenerateOptions gen;
  };
  auto o = std::make_shared<Options>();
  auto* sub = app.add_subcommand("generate", "Generate text from a model (and adapter)");
  o->model.add_to(sub);
  o->device.add_to(sub, "cpu");
  sub->add_option("--prompt,-p", o->prompt,
                  "prompt text; BOS is added when the tokenizer has one (default: empty, start from BOS)");
  sub->add_option("--template", o->format,
                  "wrap the prompt as the model was fine-tuned: none, alpaca (an instruction), or a user "
                  "message in a chat template: chat (Llama 3.1), chatml (Qwen), gemma, mistral, or auto "
                  "(the one the tokenizer's tokenizer_config.json or special tokens name) (default: the "
                  "template recorded in the --adapter directory's meshtrain_template.json, else none)")
      ->check(CLI::IsMember({"none", "alpaca", "chat", "chatml", "gemma", "mistral", "auto"}));
  sub->add_option("--max-new-tokens,-n", o->gen.max_new_tokens,
                  "tokens to generate; generation also ends where the model's context is full")
      ->check(count_in(0));
  sub->add_option("--temperature,-t", o->gen.temperature, "0: greedy")->check(CLI::NonNegativeNumber);
  sub->add_option("--top-p", o->gen.top_p, "nucleus sampling mass")->check(CLI::Range(0.0, 1.0));
  sub->add_option("--seed", o->gen.seed, "sampling seed");
  return [o] {
    validate_sampling(o->gen);  // before loading the model: a bad option should cost nothing
    const DeviceBackend backend = o->device.open();
    work_gate::reached("generate");
    auto model = o->model.load_model(*backend);
    auto tok = o->model.load_tokenizer();
    std::string format = o->format;
    if (format.empty() && !o->model.adapter.empty()) {
      format = read_adapter_template(o->model.adapter);
      // Said once, so that a wrapped prompt is no surprise and the way to turn it off is at hand.
      if (!format.empty() && format != "none")
        std::cerr << "generate: using the adapter's " << format
                  << " prompt template (--template none for the prompt as given)\n";
    }
    if (format == "auto") format = format_name(default_chat_format(*tok));
    if (format.empty()) format = "none";
    // A template whose special tokens the tokenizer lacks is refused before anything is generated.
    if (format != "none" && format != "alpaca") require_chat_tokens(*tok, parse_format(format));
    // What the tokenizer's own template writes that the built-in rendering leaves out, said once.
    if (format != "none")
      if (const auto warning = chat_template_warning(*tok, parse_format(format))) std::cerr << *warning << "\n";
    const std::vector<int32_t> prompt = prompt_ids(*tok, o->prompt, format);
    GenerateOptions gen = o->gen;
    // End of text: EOS, and BOS (a model trained on concatenated documents starts a new one), and
    // the end of an assistant turn in the chat template.
    const int32_t end_of_turn =
        format != "none" && format != "alpaca" ? end_of_turn_id(*tok, parse_format(format)) : -1;
    for (int32_t id : {tok->eos_id(), tok->bos_id(), tok->token_to_id("<|eot_id|>"), end_of_turn})
      if (id >= 0) gen.stop_ids.push_back(id);
    // Print text as it is produced: decode the whole output each time and print the new suffix,
    // since one token can complete a multi-byte character started by the previous one.
    std::vector<int32_t> out = prompt;
    std::string printed = tok->decode(out);
    std::cout << printed << std::flush;
    generate(*model, prompt, gen, [&](int32_t id) {
      out.push_back(id);
      std::string text = tok->decode(out);
      if (text.size() > printed.size() && text.compare(0, printed.size(), printed) == 0) {
        std::cout << text.substr(printed.size()) << std::flush;
        printed = text;
      }
    });
    std::cout << std::endl;
    return 0;
  };
}

}  // namespace mt::cli
