// HF config.json for LLaMA models: reading (with the checks a user needs when a file is wrong) and
// writing. Only the keys meshtrain uses are read; others (torch_dtype, bos_token_id, ...) are
// ignored. rope_scaling of type "llama3" is supported; other types are refused.
#pragma once
#include <string>

#include "model/config.h"

namespace mt {

LlamaConfig parse_hf_config(const std::string& json_text, const std::string& source);
LlamaConfig load_hf_config(const std::string& path);
// `torch_dtype` names the element type the weights beside it are stored in ("bfloat16",
// "float32"). Floats are written as the shortest decimal that reads back as the same float
// (rms_norm_eps 1e-05, not the double 9.999999747378752e-06 the float widens to).
std::string hf_config_json(const LlamaConfig& c, const std::string& torch_dtype);

}  // namespace mt
