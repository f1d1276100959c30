// Published model architectures by name, for shape-only tools (shard, plan) that need no weights.
#pragma once
#include <string>
#include <vector>

#include "model/config.h"

namespace mt {

// "llama3-8b", "llama3-70b", "llama3-405b": the Llama 3.1 configs (config.json of the HF release);
// "reference": the engine's benchmark shape (125M parameters); "gpt2", "gpt2-medium", "gpt2-large",
// "gpt2-xl": OpenAI's GPT-2 (GPT2LMHeadModel, model_type gpt2: 124M, 355M, 774M, 1.56B parameters).
// Throws mt::Error listing the known names for anything else.
LlamaConfig llama_preset(const std::string& name);
std::vector<std::string> llama_preset_names();

}  // namespace mt
