// Loading a model to start from, whatever form the user has it in:
//   - an HF directory: config.json + model.safetensors or a sharded model.safetensors.index.json
//     (HF's q/k rows are already in the rotate-half layout the model uses: no permutation);
//   - a llama2.c checkpoint file (*.bin), permuted on load;
//   - a GGUF LLaMA file (*.gguf, io/gguf_model.h), quantised types dequantised, permuted on load;
// and a PEFT adapter directory onto a model built with adapters (its adapter_config.json:
// io/peft_config.h).
#pragma once
#include <memory>
#include <string>

#include "model/transformer.h"

namespace mt {

// A model path that does not exist and is shaped like a Hugging Face Hub id (ORG/NAME, e.g.
// meta-llama/Llama-3.2-1B) fails with one line saying that meshtrain reads local directories and
// how to download one; any other path returns (its own checks follow). Every entry that takes a
// model path calls this first (pretrained_config does).
void reject_hub_id(const std::string& path);
// The architecture of a model path (config.json of an HF directory, or a llama2.c header).
ModelConfig pretrained_config(const std::string& path);
// The same, with every base tensor of the weights checked against it from the file headers
// (io/weight_shapes.h) before anything is allocated; a llama2.c file's size is checked against
// its header. Everything that builds a model from a path asks this first.
ModelConfig checked_pretrained_config(const std::string& path);
// A new model in the given precision and LoRA setup with the base weights of `path` (checked
// first, as above); adapters (if any) are initialised from `seed`. Its memory is `backend`'s.
std::unique_ptr<Transformer> load_pretrained(const std::string& path, Precision precision,
                                            const LoraConfig& lora, uint64_t seed,
                                            Backend& backend = cpu_backend());
// Checks adapter_model.safetensors' tensors against `config` and `lora` (read_peft_config) from its
// header, before the model that would hold them is allocated.
void check_peft_adapter(const std::string& adapter_dir, const ModelConfig& config, const LoraConfig& lora);
// <adapter_dir>/adapter_model.safetensors; mt::Error naming it when it is missing.
std::string adapter_weights_path(const std::string& adapter_dir);
// Loads adapter_model.safetensors into a model whose LoraConfig matches the directory's.
void load_peft_adapter(const std::string& adapter_dir, Transformer& model);

}  // namespace mt
