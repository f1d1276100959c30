// HF config.json for LLaMA models: reading (with the checks a user needs when a file is wrong) and
// writing. Only the keys meshtrain uses are read; others (torch_dtype, bos_token_id, ...) are
// ignored. rope_scaling of type "llama3" is supported; other types are refused.
#pragma once
#include <string>

#include "model/config.h"

namespace mt {

LlamaConfig parse_hf_config(const std::string& json_text, const std::string& source);
LlamaConfig load_hf_config(const std::string& path);
std::string hf_config_json(const LlamaConfig& c);

}  // namespace mt
