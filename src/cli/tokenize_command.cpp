// meshtrain tokenize --tokenizer PATH (--text STR | --input FILE|-) [--bos] [--eos] [--specials]
// With --text: the token ids of that text as a JSON list, e.g. [2028, 374, 264, 1296, 11914, 13].
// With --input (or neither: standard input): one text per line in, one JSON line per text out,
// {"text": "...", "ids": [...]}, which `meshtrain detokenize` reads back.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "cli/input_lines.h"
#include "cli/model_tokenizer.h"
#include "core/error.h"

namespace mt::cli {

Action add_tokenize_command(CLI::App& app) {
  struct Options {
    std::string tokenizer, text, input;
    bool bos = false, eos = false, specials = false;
  };
  auto opt = std::make_shared<Options>();
  auto* sub = app.add_subcommand(
      "tokenize", "Print the token ids of a text as a JSON list, or of each line of a file or standard input "
                  "as JSON lines {\"text\", \"ids\"}");
  sub->add_option("--tokenizer,-t", opt->tokenizer,
                  "Tokenizer file or directory (tiktoken, tokenizer.json, sentencepiece .model, GPT-2, "
                  "llama2.c .bin, or a GGUF file's own)")
      ->required();
  CLI::Option* text = sub->add_option("--text", opt->text, "Text to encode, printed as one JSON list (default: none, the texts of --input)");
  sub->add_option("--input,-i", opt->input,
                  "File of texts, one per line (\"-\": standard input; a line ending \\r\\n counts as \\n); prints "
                  "one JSON line per text, {\"text\": ..., \"ids\": [...]} (default: standard input, without --text)")
      ->excludes(text);
  sub->add_flag("--bos", opt->bos, "Start with the BOS token");
  sub->add_flag("--eos", opt->eos, "End with the EOS token");
  sub->add_flag("--specials", opt->specials, "Encode special-token strings as their ids");
  return [opt, text] {
    auto tok = load_any_tokenizer(opt->tokenizer);
    auto need = [&](int32_t id, const char* what) {
      if (id < 0) fail(opt->tokenizer + ": this tokenizer has no " + what + " token");
      return id;
    };
    auto encode = [&](std::string_view s) {
      std::vector<int32_t> ids;
      if (opt->bos) ids.push_back(need(tok->bos_id(), "BOS"));
      auto body = opt->specials ? tok->encode_with_specials(s) : tok->encode(s);
      ids.insert(ids.end(), body.begin(), body.end());
      if (opt->eos) ids.push_back(need(tok->eos_id(), "EOS"));
      return ids;
    };
    if (text->count() > 0) {
      const std::vector<int32_t> ids = encode(opt->text);
      std::cout << '[';
      for (size_t i = 0; i < ids.size(); ++i) std::cout << (i ? ", " : "") << ids[i];
      std::cout << "]\n";
      return 0;
    }
    for_each_input_line(opt->input.empty() ? "-" : opt->input, [&](std::string_view line, const std::string& where) {
      // JSON carries text as UTF-8: other bytes could not be written back as they are.
      if (!is_valid_utf8(line)) fail(where + ": the text is not valid UTF-8 (JSON lines carry UTF-8 text)");
      const nlohmann::ordered_json out = {{"text", std::string(line)}, {"ids", encode(line)}};
      std::cout << out.dump() << '\n';
    });
    std::cout.flush();
    return 0;
  };
}

}  // namespace mt::cli
