// GPT-2's config.json (transformers' GPT2Config, model_type "gpt2", GPT2LMHeadModel): its own
// key names (n_embd, n_layer, n_head, n_inner, n_positions, layer_norm_epsilon, ...) read into the
// model description (model/config.h: LayerNorms with biases, a GeLU MLP, learned positions, biases
// on every projection, a tied head), and written back. Keys that would change the math in a way
// meshtrain does not compute are refused in one line naming the key (docs/model-families.md).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "model/config.h"

namespace mt {

// `j` is config.json's object; `src` starts every error.
ModelConfig parse_gpt2_config(const nlohmann::json& j, const std::string& src);
// GPT2Config's keys for `c`, replacing those of a kept source config in place.
void write_gpt2_config_keys(nlohmann::ordered_json& j, const ModelConfig& c);

}  // namespace mt
