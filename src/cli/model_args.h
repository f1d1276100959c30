// Options shared by the verbs that load a trained model: --model, --adapter, --tokenizer,
// --precision; and the loading itself.
#pragma once
#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "data/tokenizer.h"
#include "model/transformer.h"

namespace mt::cli {

struct ModelArgs {
  std::string model;      // HF directory, llama2.c .bin, GGUF file, or a Hugging Face Hub id ORG/NAME
  std::string revision;   // with a Hub id: its branch, tag or commit (default: main)
  std::string adapter;    // PEFT adapter directory (optional)
  std::string tokenizer;  // default: the model directory
  std::string precision = "fp32";
  std::string base_dtype = "bf16";  // "nf4": the base's block matrices quantised as loaded (QLoRA)

  // `model_required`: --model must be given (eval can take it from a run record instead).
  void add_to(CLI::App* sub, bool model_required = true);
  // `model` as a local path: a Hub id's snapshot in the Hugging Face cache, downloaded into it when
  // absent (io/hub_model.h); once, however often it is asked.
  const std::string& path() const;
  // Replaces a Hub id in `model` by its local path, for the verbs that read `model` themselves.
  void resolve();
  // The model in `backend`'s memory.
  std::unique_ptr<Transformer> load_model(Backend& backend = cpu_backend()) const;
  std::unique_ptr<Tokenizer> load_tokenizer() const;

 private:
  mutable std::string resolved_;
};

}  // namespace mt::cli
