#include "cli/model_args.h"

#include <filesystem>

#include "cli/adapter_vocab.h"
#include "cli/model_tokenizer.h"
#include "core/error.h"
#include "data/byte_tokenizer.h"
#include "io/hub_model.h"
#include "io/peft_config.h"
#include "io/pretrained.h"
#include "model/vocab_growth.h"

namespace mt::cli {

void ModelArgs::add_to(CLI::App* sub, bool model_required) {
  sub->add_option("--model,-m", model,
                  std::string("HF model directory, llama2.c .bin, GGUF .gguf, or a Hugging Face Hub id ORG/NAME "
                              "(from the HF cache, downloaded into it when absent)") +
                      (model_required ? "" : " (default: with --run, the run's)"))
      ->required(model_required);
  sub->add_option("--revision", revision,
                  "with a Hub id: the branch, tag or commit to use (default: main)");
  sub->add_option("--adapter", adapter, "PEFT LoRA adapter directory to apply (default: none, the model alone)");
  sub->add_option("--tokenizer", tokenizer, "tokenizer file or directory, a GGUF file whose tokenizer to use, or \"byte\" (the byte-level one) (default: the model's; a GGUF model's own)");
  sub->add_option("--precision", precision, "fp32 or bf16")->check(CLI::IsMember({"fp32", "bf16"}));
  sub->add_option("--base-dtype", base_dtype,
                  "bf16, or nf4: the base's block matrices in 4-bit NormalFloat as QLoRA trains "
                  "on them (lora.base_dtype)")
      ->check(CLI::IsMember({"bf16", "nf4"}));
}

const std::string& ModelArgs::path() const {
  if (resolved_.empty()) resolved_ = hub::resolve_model_path(model, revision);
  return resolved_;
}

void ModelArgs::resolve() {
  model = path();
  revision.clear();
}

std::unique_ptr<Transformer> ModelArgs::load_model(Backend& backend) const {
  const std::string& model = path();
  LoraConfig lora;
  int64_t vocab = 0;  // an adapter's grown vocabulary (data.add_tokens), else the model's
  if (!adapter.empty()) {
    lora = read_peft_config(adapter);
    // Both files against the config from their headers, before the model is allocated.
    const ModelConfig shape = config_for_adapter(checked_pretrained_config(model), adapter, lora);
    check_peft_adapter(adapter, shape, lora);
    vocab = shape.vocab_size;
  }
  lora.base_dtype = base_dtype;
  auto m = load_pretrained(model, precision == "bf16" ? Precision::bf16 : Precision::fp32, lora, 0, backend);
  if (vocab > m->config().vocab_size) m = grow_vocabulary(std::move(m), vocab, 0);
  if (!adapter.empty()) load_peft_adapter(adapter, *m);
  // The tokenizer's size against the vocabulary; a verb that needs no tokenizer (export of a model
  // that has none) is not refused here for lacking one.
  std::unique_ptr<Tokenizer> tok;
  try {
    tok = load_tokenizer();
  } catch (const Error&) {
  }
  if (tok) fit_model_to_tokenizer(*m, *tok, model);
  return m;
}

std::unique_ptr<Tokenizer> ModelArgs::load_tokenizer() const {
  const std::string& model = path();
  if (tokenizer == "byte") return std::make_unique<ByteTokenizer>();  // as data.tokenizer = "byte"
  if (!tokenizer.empty()) return load_any_tokenizer(tokenizer);
  // An adapter that added tokens carries the tokenizer that has them.
  if (const std::string own = adapter_tokenizer_dir(adapter); !own.empty()) return mt::load_tokenizer(own);
  if (is_gguf_path(model)) return load_any_tokenizer(model);  // a GGUF file carries its own
  namespace fs = std::filesystem;
  // A llama2.c .bin has its tokenizer beside it; an HF directory has it inside.
  fs::path dir = fs::is_directory(model) ? fs::path(model) : fs::path(model).parent_path();
  return mt::load_tokenizer(dir.empty() ? "." : dir.string());
}

}  // namespace mt::cli
