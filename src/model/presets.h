// Published model architectures by name, for shape-only tools (shard, plan) that need no weights.
#pragma once
#include <string>
#include <vector>

#include "model/config.h"

namespace mt {

// "llama3-8b", "llama3-70b", "llama3-405b": the Llama 3.1 configs (config.json of the HF release);
// "reference": the engine's benchmark shape (125M parameters); "gpt2", "gpt2-medium", "gpt2-large",
// "gpt2-xl": OpenAI's GPT-2 (GPT2LMHeadModel, model_type gpt2: 124M, 355M, 774M, 1.56B parameters);
// "gemma3-1b", "gemma3-4b", "gemma3-12b", "gemma3-27b": Gemma 3's text models (config.json of the
// 1B release, the text_config of the others).
// Throws mt::Error listing the known names for anything else.
ModelConfig llama_preset(const std::string& name);
std::vector<std::string> llama_preset_names();

// The parts every Gemma 3 text model has (docs/model-families.md, "Gemma 3"): norms scaling by
// (1 + w), post norms, GeGLU, q/k norms, embeddings scaled by sqrt(hidden), model_type
// gemma3_text. Shared by the HF reader (io/hf_gemma3.cpp) and the presets.
void give_gemma3_parts(ModelConfig& c);


}  // namespace mt
