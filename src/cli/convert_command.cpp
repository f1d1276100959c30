// meshtrain convert --llama2c MODEL.bin [--tokenizer tok.bin] --out DIR: an HF model directory.
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "core/error.h"
#include "core/system_dirs.h"
#include "core/work_gate.h"
#include "data/tokenizer.h"
#include "data/tokenizer_files.h"
#include "io/llama2c.h"
#include "io/model_files.h"

namespace mt::cli {

Action add_convert_command(CLI::App& app) {
  struct Options {
    std::string llama2c, tokenizer, out;
  };
  auto o = std::make_shared<Options>();
  auto* sub = app.add_subcommand("convert", "Convert a llama2.c checkpoint into an HF model directory");
  sub->add_option("--llama2c", o->llama2c, "llama2.c checkpoint (.bin)")->required();
  sub->add_option("--tokenizer", o->tokenizer,
                  "llama2.c tokenizer (.bin), copied as tokenizer.bin, or another tokenizer file (a sentencepiece "
                  ".model, ...), plus an HF tokenizer.json and tokenizer_config.json made from it "
                  "(default: none, no tokenizer)");
  sub->add_option("--out,-o", o->out, "output directory")->required();
  return [o] {
    namespace fs = std::filesystem;
    refuse_system_directory(o->out, "--out");
    work_gate::reached("convert");
    auto model = load_llama2c(o->llama2c);
    ModelOrigin origin{o->llama2c, {}};  // a .bin has no config.json: the ids come from the tokenizer
    if (!o->tokenizer.empty()) {
      auto tok = load_tokenizer(o->tokenizer);  // validate before writing anything
      if (tok->vocab_size() != model->config().vocab_size)
        fail(o->tokenizer + ": tokenizer has " + std::to_string(tok->vocab_size()) +
             " tokens, the model " + std::to_string(model->config().vocab_size));
      origin.tokens = {true, tok->bos_id(), tok->eos_id()};
    }
    auto written = save_base_model(*model, o->out, origin);
    if (!o->tokenizer.empty() && fs::path(o->tokenizer).extension() != ".bin") {
      // Another tokenizer file (a sentencepiece tokenizer.model, ...) goes as save_tokenizer_files
      // puts it: under its HF name, with tokenizer.json beside it. (It was copied as tokenizer.bin,
      // which then could not be read.)
      for (auto& f : save_tokenizer_files(o->tokenizer, o->out)) written.push_back(f);
    } else if (!o->tokenizer.empty()) {
      const std::string dst = (fs::path(o->out) / "tokenizer.bin").string();
      fs::copy_file(o->tokenizer, dst, fs::copy_options::overwrite_existing);
      fs::permissions(dst, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::add);
      written.push_back(dst);
      // tokenizer.json and tokenizer_config.json from it: a complete HF model directory.
      for (auto& f : save_tokenizer_files(dst, o->out)) written.push_back(f);
    }
    std::cout << "converted " << o->llama2c << " (" << model->base().numel() << " parameters)\n";
    for (const auto& f : written) std::cout << "  wrote " << f << "\n";
    return 0;
  };
}

}  // namespace mt::cli
