// The mixture-of-experts families' config.json keys (model/moe.h): mixtral, qwen3_moe and olmoe,
// read into ModelConfig and written back; the MoE model types meshtrain does not compute, refused
// in one line naming what is missing. Their attention is read by hf_config.cpp (mixtral:
// mistral's, qwen3_moe: qwen3's, olmoe: llama's with q/k norms over the whole projections).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "model/config.h"

namespace mt {

bool is_moe_model_type(const std::string& model_type);  // mixtral, qwen3_moe, olmoe
// For a model_type that is a mixture of experts meshtrain does not compute (qwen2_moe,
// deepseek_v2/v3, ...): the one-line reason, naming what is missing; "" for any other type.
std::string unsupported_moe_reason(const std::string& model_type, const std::string& src);
// The expert keys of a mixtral / qwen3_moe / olmoe config.json into c (its dense keys already read).
void read_moe_config(const nlohmann::json& j, ModelConfig& c, const std::string& src);
void write_moe_keys(nlohmann::ordered_json& j, const ModelConfig& c);

}  // namespace mt
