// HF config.json for the LLaMA family (model_type llama, mistral, qwen2, qwen3, gemma3_text: the
// last in io/hf_gemma3.cpp; docs/model-families.md):
// reading (with the checks a user needs when a file is wrong) and writing. Only the keys meshtrain
// uses are read; others (torch_dtype, bos_token_id, ...) are ignored on reading and kept on
// writing. rope_scaling of type "llama3" (or "default"; gemma3_text: "linear") is supported; other
// types are refused, as are keys claiming what meshtrain does not compute (a bias key on a family
// whose modeling code has no such bias, a hidden_act other than silu, quantization_config,
// attention_dropout, rope_parameters).
#pragma once
#include <cstdint>
#include <string>

#include "model/config.h"

namespace mt {

ModelConfig parse_hf_config(const std::string& json_text, const std::string& source);
ModelConfig load_hf_config(const std::string& path);
// The special ids of the tokenizer that goes with the weights (-1: it has none); `known` is false
// when no tokenizer is known.
struct SpecialTokenIds {
  bool known = false;
  int32_t bos = -1, eos = -1;
};

// `torch_dtype` names the element type the weights beside it are stored in ("bfloat16",
// "float32"). Floats are written as the shortest decimal that reads back as the same float
// (rms_norm_eps 1e-05, not the double 9.999999747378752e-06 the float widens to).
// `source_json`: the config.json the model was loaded from ("" for none). Its keys are kept in
// its order (bos/eos/pad ids, head_dim, use_cache, unknown keys, ...); meshtrain replaces only the
// architecture keys it read and trained with, and torch_dtype (and dtype). bos_token_id and
// eos_token_id the source lacks come from `tokens` (null where the tokenizer has none).
std::string hf_config_json(const ModelConfig& c, const std::string& torch_dtype,
                           const std::string& source_json = "", const SpecialTokenIds& tokens = {});

}  // namespace mt
