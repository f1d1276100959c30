// Writes a model directory HF transformers loads: config.json and model.safetensors with HF names.
#pragma once
#include <string>
#include <vector>

#include "model/llama.h"

namespace mt {

// Writes <dir>/config.json and <dir>/model.safetensors (base weights, in the run's precision).
// Returns the paths written.
std::vector<std::string> save_base_model(LlamaModel& model, const std::string& dir);

}  // namespace mt
