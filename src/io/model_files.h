// Writes a model directory HF transformers loads: config.json and model.safetensors with HF names.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "model/llama.h"

namespace mt {

// Writes <dir>/config.json and <dir>/model.safetensors (base weights, in the run's precision).
// Returns the paths written.
std::vector<std::string> save_base_model(LlamaModel& model, const std::string& dir);

// The same from tensors fetched one at a time (f32 values, in the order given), so a sharded
// model can be exported tensor by tensor without ever being whole in one process's memory.
struct ExportTensor {
  std::string name;
  std::vector<int64_t> shape;
};
using FetchValues = std::function<std::vector<float>(const std::string& name)>;
std::vector<std::string> save_base_model(const LlamaConfig& config, Precision precision,
                                         const std::vector<ExportTensor>& tensors,
                                         const FetchValues& fetch, const std::string& dir);

}  // namespace mt
