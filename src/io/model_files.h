// Writes a trained model's files: HF-style config.json, and the weights as safetensors under
// their HF names (base) or with the adapters alone (LoRA runs).
#pragma once
#include <string>
#include <vector>

#include "model/llama.h"

namespace mt {

// Writes <dir>/config.json and <dir>/model.safetensors (base weights, in the run's precision).
// Returns the paths written.
std::vector<std::string> save_base_model(LlamaModel& model, const std::string& dir);
// Writes <dir>/adapter.safetensors (LoRA A and B, f32). Returns the path written.
std::string save_adapters(LlamaModel& model, const std::string& dir);

}  // namespace mt
