// meshtrain export --model DIR [--adapter DIR] [--merged DIR] [--gguf FILE] [--gguf-adapter FILE]:
// a merged HF model directory, GGUF files for llama.cpp (model and LoRA adapter).
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include "cli/commands.h"
#include "cli/adapter_vocab.h"
#include "cli/export_chat_template.h"
#include "cli/model_args.h"
#include "cli/model_tokenizer.h"
#include "core/error.h"
#include "core/system_dirs.h"
#include "core/work_gate.h"
#include "data/ggml_vocab.h"
#include "data/tokenizer.h"
#include "data/tokenizer_files.h"
#include "io/adapter_template.h"
#include "io/gguf_export.h"
#include "io/model_files.h"
#include "train/run_outputs.h"

namespace mt::cli {

namespace {

namespace fs = std::filesystem;

// "wrote PATH", and PATH recorded in the run directory it lies in (train --overwrite replaces it).
void wrote(const std::string& path, const std::string& what = "") {
  std::cout << "wrote " << path << what << "\n";
  record_run_output(path, std::cerr);
}

// The tokenizer that travels with the exports: --tokenizer, else the model's own (a GGUF file's
// metadata, or the tokenizer files in or beside the model). Everything is read before anything
// is written, so a bad tokenizer costs no half-written output.
struct ExportTokenizer {
  std::string file;                  // tokenizer file to copy next to a merged model, "" if none
  std::optional<TokenizerInfo> gguf;  // the tokenizer of a GGUF source, kept as it is
  std::unique_ptr<Tokenizer> tok;     // null: no tokenizer
  std::string looked;                 // where the model's own was looked for, for messages
};

// `as_tokenizer`: also build the tokenizer of a GGUF source (a merged HF directory needs its
// files); a GGUF -> GGUF export copies the metadata as it is, whatever meshtrain can encode.
ExportTokenizer resolve_tokenizer(const ModelArgs& m, bool as_tokenizer) {
  ExportTokenizer t;
  const std::string source = m.tokenizer.empty() ? m.model : m.tokenizer;
  if (is_gguf_path(source)) {
    t.looked = source + " (tokenizer.ggml.* metadata)";
    t.gguf = gguf_tokenizer_info(source);
    if (!t.gguf && !m.tokenizer.empty())
      fail("export: --tokenizer " + source + " carries no tokenizer (no tokenizer.ggml.model)");
    if (t.gguf && as_tokenizer) t.tok = tokenizer_of_ggml_vocab(*t.gguf, source);
    return t;
  }
  if (!m.tokenizer.empty()) {
    t.file = find_tokenizer_file(m.tokenizer);
  } else if (const std::string own = adapter_tokenizer_dir(m.adapter); !own.empty()) {
    t.file = find_tokenizer_file(own);  // an adapter that added tokens carries the tokenizer with them
  } else {
    const fs::path dir = fs::is_directory(m.model) ? fs::path(m.model) : fs::path(m.model).parent_path();
    t.looked = (dir.empty() ? std::string(".") : dir.string()) +
               " (tokenizer.byte, tokenizer.json, tokenizer.model, vocab.json+merges.txt, tokenizer.bin, tok*.bin)";
    try {
      t.file = find_tokenizer_file(dir.empty() ? "." : dir.string());
    } catch (const Error&) {
      return t;  // the model has none: fine for --merged, refused for --gguf below
    }
  }
  t.tok = load_tokenizer(t.file);
  return t;
}

}  // namespace

Action add_export_command(CLI::App& app) {
  struct Options {
    ModelArgs model;
    std::string merged, gguf, gguf_adapter, gguf_dtype = "f16";
    bool no_tokenizer = false;
  };
  auto o = std::make_shared<Options>();
  auto* sub = app.add_subcommand("export", "Write a merged HF model and/or GGUF files");
  o->model.add_to(sub);
  sub->add_option("--merged", o->merged,
                  "directory for the model with the adapter merged in (default: none, not written)");
  sub->add_option("--gguf", o->gguf,
                  "GGUF file of the (merged) model for llama.cpp, with its tokenizer as tokenizer.ggml.* "
                  "metadata (default: none, not written)");
  sub->add_option("--gguf-dtype", o->gguf_dtype,
                  "matrix type in the GGUF model: f32, f16, bf16, or ggml's block-quantised q8_0, q4_0 "
                  "(norms stay f32; the file is labelled by the type its matrices hold; docs/formats.md: GGUF export)")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "q8_0", "q4_0"}));
  sub->add_option("--gguf-adapter", o->gguf_adapter,
                  "GGUF LoRA adapter file, needs --adapter (default: none, not written)");
  sub->add_flag("--no-tokenizer", o->no_tokenizer,
                "write the exports without a tokenizer (default: off; a GGUF model without one is refused, "
                "since llama.cpp cannot load it)");
  return [o] {
    if (o->merged.empty() && o->gguf.empty() && o->gguf_adapter.empty())
      fail("export: nothing to do; give --merged, --gguf and/or --gguf-adapter");
    // The model's name for the GGUF adapter: a Hub id's NAME, not its snapshot's commit.
    const std::string model_name = fs::path(o->model.model).filename().string();
    if (!o->merged.empty()) refuse_system_directory(o->merged, "--merged");
    if (!o->gguf_adapter.empty() && o->model.adapter.empty())
      fail("export: --gguf-adapter needs --adapter");
    if (o->no_tokenizer && !o->model.tokenizer.empty())
      fail("export: --tokenizer and --no-tokenizer contradict each other; give one");
    if (!o->model.tokenizer.empty() && o->merged.empty() && o->gguf.empty())
      fail("export: --tokenizer applies to --merged and --gguf; a GGUF LoRA adapter carries no tokenizer");
    o->model.resolve();  // a Hub id: its snapshot, whose files the tokenizer is looked for in
    ExportTokenizer tok;
    if (!o->no_tokenizer) tok = resolve_tokenizer(o->model, !o->merged.empty());
    // The template the adapter was trained with, read before anything is written: the merged
    // model's tokenizer_config.json records it.
    const std::string trained = o->model.adapter.empty() || o->merged.empty() || o->no_tokenizer
                                    ? std::string()
                                    : read_adapter_template(o->model.adapter);
    const std::string trained_jinja = trained.empty() ? std::string() : read_adapter_chat_template(o->model.adapter);
    if (!o->gguf.empty() && !o->no_tokenizer && !tok.tok && !tok.gguf)
      fail("export: no tokenizer for " + o->gguf + ": none in " + tok.looked +
           "; give --tokenizer PATH, or --no-tokenizer to write a GGUF file llama.cpp cannot load alone");
    // An adapter trained on an NF4 base is merged into that base dequantised, as PEFT users merge
    // a QLoRA adapter: the model is loaded unquantised and its projections replaced by their NF4
    // round trip (an NF4 tensor cannot hold the sum).
    ModelArgs args = o->model;
    const bool nf4 = args.base_dtype == "nf4";
    args.base_dtype = "bf16";
    work_gate::reached("export");
    auto model = args.load_model();
    if (nf4) model->round_trip_nf4();
    // The GGUF's vocabulary before anything is written: a tokenizer that does not fit the model
    // is refused with nothing half done.
    std::optional<TokenizerInfo> vocab;
    if (!o->gguf.empty() && tok.gguf) vocab = tok.gguf;  // a GGUF source's tokenizer, unchanged
    else if (!o->gguf.empty() && tok.tok) vocab = ggml_vocab_of(*tok.tok, model->config().vocab_size);
    if (vocab && int64_t(vocab->tokens.size()) != model->config().vocab_size)
      fail("export: the tokenizer of " + o->model.tokenizer + " has " + std::to_string(vocab->tokens.size()) +
           " tokens but the model's vocab_size is " + std::to_string(model->config().vocab_size));
    if (!o->gguf_adapter.empty()) {
      export_gguf_lora(*model, o->gguf_adapter, model_name);
      wrote(o->gguf_adapter, " (GGUF LoRA adapter)");
    }
    model->merge_adapters();
    if (!o->merged.empty()) {
      ModelOrigin origin{o->model.model, {}};
      if (tok.tok) origin.tokens = {true, tok.tok->bos_id(), tok.tok->eos_id()};
      for (const auto& f : save_base_model(*model, o->merged, origin)) wrote(f);
      if (!tok.file.empty())
        for (const auto& f : save_tokenizer_files(tok.file, o->merged)) wrote(f);
      else if (tok.tok)
        for (const auto& f : save_tokenizer_files(*tok.tok, o->merged)) wrote(f);
      std::string source;
      const std::string jinja = tok.tok ? export_chat_template(trained, trained_jinja, tok.tok.get(), source) : std::string();
      if (!jinja.empty())
        if (const std::string f = record_chat_template(o->merged, jinja); !f.empty()) wrote(f, " (chat_template: " + source + ")");
    }
    if (!o->gguf.empty()) {
      const GgufDtype dt = parse_gguf_dtype(o->gguf_dtype);
      const GgufModelWritten w = export_gguf_model(*model, o->gguf, vocab ? &*vocab : nullptr, dt);
      wrote(o->gguf, std::string(" (GGUF model, ") + w.architecture + ", " + gguf_dtype_name(w.file_type) +
                         (vocab ? ", tokenizer " + vocab->model + (vocab->pre.empty() ? "" : "/" + vocab->pre)
                                : std::string(", no tokenizer")) +
                         ")");
      if (!w.note.empty()) std::cout << "  note: " << w.note << "\n";
      if (w.file_type != dt)
        std::cout << "  no matrix could take " << o->gguf_dtype << " (rows not a multiple of 32 values): "
                  << "the file holds " << gguf_dtype_name(w.file_type) << " and is labelled so\n";
      else if (!w.kept_f16.empty()) {
        std::cout << "  kept at f16 (rows not a multiple of 32 values, which " << o->gguf_dtype
                  << " blocks need):";
        for (const auto& n : w.kept_f16) std::cout << " " << n;
        std::cout << "\n";
      }
    }
    return 0;
  };
}

}  // namespace mt::cli
