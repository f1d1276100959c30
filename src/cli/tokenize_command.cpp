// meshtrain tokenize --tokenizer PATH --text STR [--bos] [--eos] [--specials]
// Prints the token ids as a JSON list, e.g. [2028, 374, 264, 1296, 11914, 13].
#include <iostream>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/model_tokenizer.h"
#include "core/error.h"

namespace mt::cli {

Action add_tokenize_command(CLI::App& app) {
  struct Options {
    std::string tokenizer, text;
    bool bos = false, eos = false, specials = false;
  };
  auto opt = std::make_shared<Options>();
  auto* sub = app.add_subcommand("tokenize", "Print the token ids of a text as a JSON list");
  sub->add_option("--tokenizer,-t", opt->tokenizer,
                  "Tokenizer file or directory (tiktoken, tokenizer.json, sentencepiece .model, GPT-2, "
                  "llama2.c .bin, or a GGUF file's own)")
      ->required();
  sub->add_option("--text", opt->text, "Text to encode")->required();
  sub->add_flag("--bos", opt->bos, "Start with the BOS token");
  sub->add_flag("--eos", opt->eos, "End with the EOS token");
  sub->add_flag("--specials", opt->specials, "Encode special-token strings as their ids");
  return [opt] {
    auto tok = load_any_tokenizer(opt->tokenizer);
    auto need = [&](int32_t id, const char* what) {
      if (id < 0) fail(opt->tokenizer + ": this tokenizer has no " + what + " token");
      return id;
    };
    std::vector<int32_t> ids;
    if (opt->bos) ids.push_back(need(tok->bos_id(), "BOS"));
    auto body = opt->specials ? tok->encode_with_specials(opt->text) : tok->encode(opt->text);
    ids.insert(ids.end(), body.begin(), body.end());
    if (opt->eos) ids.push_back(need(tok->eos_id(), "EOS"));
    std::cout << '[';
    for (size_t i = 0; i < ids.size(); ++i) std::cout << (i ? ", " : "") << ids[i];
    std::cout << "]\n";
    return 0;
  };
}

}  // namespace mt::cli
