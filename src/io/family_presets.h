// The published sizes of the families built on the LLaMA block (Qwen2.5, Qwen3, Mistral), for the
// shape-only tools (plan, shard). Each preset is the architecture keys of its release's HF
// config.json, read by parse_hf_config: the family's parts (q/k/v biases, q/k norms, an explicit
// head_dim, a sliding window, tied embeddings) come out exactly as when its directory is loaded,
// and the parameter count is that of the tensors the model declares (llama_param_shapes).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"

namespace mt {

struct FamilyPreset {
  const char* name;         // "qwen3-8b"
  const char* source;       // the Hugging Face repository its config.json is from
  const char* published;    // the parameter count its model card prints ("8.2B")
  const char* config_json;  // the architecture keys of that config.json, verbatim
};

// Every family preset, in the order `plan` lists them.
const std::vector<FamilyPreset>& family_presets();
std::vector<std::string> family_preset_names();
// nullptr when `name` is none of them.
const FamilyPreset* find_family_preset(const std::string& name);
// The preset's config, as parse_hf_config reads it. Throws mt::Error listing the names.
ModelConfig family_preset(const std::string& name);

// Every published shape by name: model/presets.h's Llama 3.1 shapes and the families'.
std::vector<std::string> published_preset_names();
ModelConfig published_preset(const std::string& name);

}  // namespace mt
