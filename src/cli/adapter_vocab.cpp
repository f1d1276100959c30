#include "cli/adapter_vocab.h"

#include <filesystem>

#include "core/error.h"
#include "io/peft_config.h"
#include "io/peft_names.h"
#include "io/pretrained.h"
#include "io/safetensors_index.h"

namespace mt::cli {

namespace fs = std::filesystem;

ModelConfig config_for_adapter(ModelConfig config, const std::string& adapter_dir, const LoraConfig& lora) {
  if (!lora.train_embeddings) return config;
  const SafetensorsCheckpoint ckpt(adapter_weights_path(adapter_dir));
  const std::string embed = file_tensor_name(kPeftPrefix, kEmbedCopyName);
  if (!ckpt.contains(embed)) return config;  // check_peft_adapter names it missing
  const std::vector<int64_t>& shape = ckpt.info(embed).shape;
  // Only grown: a smaller table is a shape check_peft_adapter refuses, naming both.
  if (shape.size() == 2 && shape[0] > config.vocab_size) config.vocab_size = shape[0];
  return config;
}

std::string adapter_tokenizer_dir(const std::string& adapter_dir) {
  if (adapter_dir.empty() || !read_peft_config(adapter_dir).train_embeddings) return "";
  return fs::is_regular_file(fs::path(adapter_dir) / "tokenizer.json") ? adapter_dir : "";
}

void fit_model_to_tokenizer(Transformer& model, const Tokenizer& tok, const std::string& where) {
  const int64_t vocab = model.config().vocab_size;
  if (tok.vocab_size() > vocab)
    fail("the " + std::string(tok.kind()) + " tokenizer has " + std::to_string(tok.vocab_size()) +
         " tokens but " + where + " has vocab_size " + std::to_string(vocab) +
         ": its ids past " + std::to_string(vocab - 1) + " have no row in the model; give the model's own tokenizer");
  model.set_emittable_vocab(tok.vocab_size());
}

}  // namespace mt::cli
