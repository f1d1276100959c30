// Writes a model directory HF transformers loads: config.json, generation_config.json and
// model.safetensors with HF names.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "io/hf_config.h"
#include "model/transformer.h"

namespace mt {

// Where the weights came from, for the metadata written beside them.
struct ModelOrigin {
  // The model path they were loaded from: an HF directory (the keys of its config.json that
  // meshtrain does not change, and its generation_config.json, are kept), a llama2.c .bin, or ""
  // for a new model.
  std::string path;
  SpecialTokenIds tokens;  // the tokenizer's ids, for the keys the origin does not give
};

// Writes <dir>/config.json, <dir>/generation_config.json and <dir>/model.safetensors (base
// weights, in the run's precision). Returns the paths written.
std::vector<std::string> save_base_model(Transformer& model, const std::string& dir,
                                         const ModelOrigin& origin = {});

// The same from tensors fetched one at a time (f32 values, in the order given), so a sharded
// model can be exported tensor by tensor without ever being whole in one process's memory.
struct ExportTensor {
  std::string name;
  std::vector<int64_t> shape;
};
using FetchValues = std::function<std::vector<float>(const std::string& name)>;
std::vector<std::string> save_base_model(const ModelConfig& config, Precision precision,
                                         const std::vector<ExportTensor>& tensors,
                                         const FetchValues& fetch, const std::string& dir,
                                         const ModelOrigin& origin = {});

}  // namespace mt
