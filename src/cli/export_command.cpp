// meshtrain export --model DIR [--adapter DIR] [--merged DIR] [--gguf FILE] [--gguf-adapter FILE]:
// a merged HF model directory, GGUF files for llama.cpp (model and LoRA adapter).
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/model_args.h"
#include "core/error.h"
#include "data/tokenizer.h"
#include "io/gguf_export.h"
#include "data/tokenizer_files.h"
#include "io/model_files.h"

namespace mt::cli {

namespace {

namespace fs = std::filesystem;

// The tokenizer file that travels with a model (copied next to exports), or "" when none.
std::string tokenizer_file_of(const std::string& model) {
  fs::path dir = fs::is_directory(model) ? fs::path(model) : fs::path(model).parent_path();
  try {
    return find_tokenizer_file(dir.empty() ? "." : dir.string());
  } catch (const Error&) {
    return "";
  }
}

}  // namespace

Action add_export_command(CLI::App& app) {
  struct Options {
    ModelArgs model;
    std::string merged, gguf, gguf_adapter, gguf_dtype = "f16";
  };
  auto o = std::make_shared<Options>();
  auto* sub = app.add_subcommand("export", "Write a merged HF model and/or GGUF files");
  o->model.add_to(sub);
  sub->add_option("--merged", o->merged,
                  "directory for the model with the adapter merged in (default: none, not written)");
  sub->add_option("--gguf", o->gguf, "GGUF file of the (merged) model for llama.cpp (default: none, not written)");
  sub->add_option("--gguf-dtype", o->gguf_dtype,
                  "matrix type in the GGUF model: f32, f16, bf16, or ggml's block-quantised q8_0, q4_0 "
                  "(norms stay f32; README: GGUF export)")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "q8_0", "q4_0"}));
  sub->add_option("--gguf-adapter", o->gguf_adapter,
                  "GGUF LoRA adapter file, needs --adapter (default: none, not written)");
  return [o] {
    if (o->merged.empty() && o->gguf.empty() && o->gguf_adapter.empty())
      fail("export: nothing to do; give --merged, --gguf and/or --gguf-adapter");
    if (!o->gguf_adapter.empty() && o->model.adapter.empty())
      fail("export: --gguf-adapter needs --adapter");
    // An adapter trained on an NF4 base is merged into that base dequantised, as PEFT users merge
    // a QLoRA adapter: the model is loaded unquantised and its projections replaced by their NF4
    // round trip (an NF4 tensor cannot hold the sum).
    ModelArgs args = o->model;
    const bool nf4 = args.base_dtype == "nf4";
    args.base_dtype = "bf16";
    auto model = args.load_model();
    if (nf4) model->round_trip_nf4();
    const std::string tok_file = tokenizer_file_of(o->model.model);
    if (!o->gguf_adapter.empty()) {
      export_gguf_lora(*model, o->gguf_adapter, fs::path(o->model.model).filename().string());
      std::cout << "wrote " << o->gguf_adapter << " (GGUF LoRA adapter)\n";
    }
    model->merge_adapters();
    if (!o->merged.empty()) {
      ModelOrigin origin{o->model.model, {}};
      if (!tok_file.empty()) {
        const auto tok = load_tokenizer(tok_file);
        origin.tokens = {true, tok->bos_id(), tok->eos_id()};
      }
      for (const auto& f : save_base_model(*model, o->merged, origin)) std::cout << "wrote " << f << "\n";
      if (!tok_file.empty())
        for (const auto& f : save_tokenizer_files(tok_file, o->merged)) std::cout << "wrote " << f << "\n";
    }
    if (!o->gguf.empty()) {
      const GgufDtype dt = parse_gguf_dtype(o->gguf_dtype);
      // llama.cpp needs the vocabulary inside the file; llama2.c's tokenizer.bin carries it.
      std::unique_ptr<TokenizerInfo> info;
      // meshtrain's model directories hold tokenizer.json beside it, which load_tokenizer prefers.
      const fs::path bin = tok_file.empty() ? fs::path() : fs::path(tok_file).parent_path() / "tokenizer.bin";
      if (!bin.empty() && fs::is_regular_file(bin))
        info = std::make_unique<TokenizerInfo>(
            tokenizer_info_from_llama2c(bin.string(), model->config().vocab_size));
      else
        std::cerr << "export: warning: no llama2.c tokenizer.bin next to the model; the GGUF file "
                     "has no tokenizer.ggml.* metadata\n";
      const auto kept = export_gguf_model(*model, o->gguf, info.get(), dt);
      std::cout << "wrote " << o->gguf << " (GGUF model, " << o->gguf_dtype << ")\n";
      if (!kept.empty()) {
        std::cout << "  kept at f16 (rows not a multiple of 32 values, which " << o->gguf_dtype
                  << " blocks need):";
        for (const auto& n : kept) std::cout << " " << n;
        std::cout << "\n";
      }
    }
    return 0;
  };
}

}  // namespace mt::cli
