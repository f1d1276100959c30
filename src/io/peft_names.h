// The names PEFT gives an adapter's tensors in adapter_model.safetensors, from ours.
#pragma once
#include <string>

namespace mt {

inline constexpr const char* kPeftPrefix = "base_model.model.";

// A parameter's name in a weights file: `prefix` before ours. In a PEFT adapter (prefix
// kPeftPrefix) a trained router's copy (moe_router_copy_name, "...gate.modules_to_save.weight") is
// saved under the router's own name, "base_model.model....gate.weight", as PEFT's
// get_peft_model_state_dict saves a modules_to_save copy; set_peft_model_state_dict reads it back
// into the copy. So are the embedding's and head's copies (LoraConfig::train_embeddings):
// "base_model.model.model.embed_tokens.weight", "base_model.model.lm_head.weight".
std::string file_tensor_name(const std::string& prefix, const std::string& ours);

}  // namespace mt
