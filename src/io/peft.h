// PEFT LoRA adapter directories: adapter_config.json + adapter_model.safetensors with PEFT's
// tensor names (base_model.model.<module>.lora_A.weight, A [r, in], B [out, r]), as written by
// peft's save_pretrained and read by its from_pretrained.
#pragma once
#include <string>
#include <vector>

#include "io/model_files.h"
#include "model/transformer.h"

namespace mt {

// "q" -> "q_proj", "lm_head" -> "lm_head"; with `mixtral_experts` the MLP's roles are the
// experts' modules of Mixtral (gate -> w1, up -> w3, down -> w2), as PEFT targets them there.
std::string peft_module_name(const std::string& target, bool mixtral_experts = false);
std::string peft_adapter_config_json(const LoraConfig& lora, const std::string& base_model,
                                     bool mixtral_experts = false);
// Writes <dir>/adapter_config.json and <dir>/adapter_model.safetensors (f32). Returns the paths.
std::vector<std::string> save_peft_adapter(Transformer& model, const std::string& dir,
                                           const std::string& base_model);
// The same from adapters fetched one at a time (see save_base_model's streamed form).
std::vector<std::string> save_peft_adapter(const LoraConfig& lora, const std::vector<ExportTensor>& adapters,
                                           const FetchValues& fetch, const std::string& dir,
                                           const std::string& base_model);

}  // namespace mt
