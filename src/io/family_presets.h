// The published sizes of the families the planner and `shard` know by name (Qwen2.5, Qwen3,
// Mistral, the mixtures of experts Mixtral and Qwen3-MoE, and the Frontier study's GPT shapes), for
// the shape-only tools. Each preset is the architecture keys of its release's HF config.json (the
// GPT shapes: GPT-2's keys with the study's sizes), read by parse_hf_config: the family's parts
// (q/k/v biases, q/k norms, an explicit head_dim, a sliding window, tied embeddings; GPT-2's
// LayerNorm, GeLU MLP, learned positions and biases; the experts, their router and routing) come
// out exactly as when its directory is loaded, and the parameter count is that of the tensors the
// model declares (llama_param_shapes).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"

namespace mt {

// One preset, declared by what sets it apart: the keys every size of its family shares come from
// the family (family_preset_json merges them), the entry gives the rest.
struct FamilyPreset {
  const char* name;       // "qwen3-8b"
  const char* family;     // "qwen2", "qwen3", "mistral", "mixtral", "qwen3_moe", "gpt": the keys
                          // the family's sizes share
  const char* source;     // the Hugging Face repository its config.json is from, or the paper
  const char* published;  // the parameter count its model card (or paper) prints ("8.2B")
  const char* keys;       // the keys of that config.json that differ from the family's, verbatim
  // A mixture of experts: the parameters a token uses that its model card prints ("3.3B"); "" else.
  const char* published_active = "";
};

// Every family preset, in the order `plan` lists them.
const std::vector<FamilyPreset>& family_presets();
std::vector<std::string> family_preset_names();
// nullptr when `name` is none of them.
const FamilyPreset* find_family_preset(const std::string& name);
// The preset's config.json text: its family's keys with the preset's own over them. Throws
// mt::Error listing the names.
std::string family_preset_json(const std::string& name);
// The preset's config, as parse_hf_config reads that text. Throws mt::Error listing the names.
ModelConfig family_preset(const std::string& name);

// Every published shape by name: model/presets.h's Llama 3.1, GPT-2 and Gemma 3 shapes and the
// families'.
std::vector<std::string> published_preset_names();
ModelConfig published_preset(const std::string& name);

}  // namespace mt
