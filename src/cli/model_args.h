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
  std::string model;      // HF directory or llama2.c .bin
  std::string adapter;    // PEFT adapter directory (optional)
  std::string tokenizer;  // default: the model directory
  std::string precision = "fp32";
  std::string base_dtype = "bf16";  // "nf4": the base's block matrices quantised as loaded (QLoRA)

  // `model_required`: --model must be given (eval can take it from a run record instead).
  void add_to(CLI::App* sub, bool model_required = true);
  // The model in `backend`'s memory.
  std::unique_ptr<Transformer> load_model(Backend& backend = cpu_backend()) const;
  std::unique_ptr<Tokenizer> load_tokenizer() const;
};

}  // namespace mt::cli
