// Gemma 3's config.json (model_type gemma3_text, Gemma3ForCausalLM; docs/model-families.md,
// "Gemma 3"): what it adds to the LLaMA keys hf_config.cpp reads, the keys it refuses, and the
// keys an HF export writes back. The rules follow transformers' configuration_gemma3.py and
// modeling_gemma3.py (read, not copied).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/config.h"

namespace mt {

inline constexpr const char* kGemma3ModelType = "gemma3_text";

// Fails in one line naming the key for what meshtrain does not compute: final_logit_softcapping
// or attn_logit_softcapping set, use_bidirectional_attention, a hidden_activation (or hidden_act)
// other than gelu_pytorch_tanh, a rope_scaling type other than linear / default.
void refuse_gemma3_unimplemented(const nlohmann::json& j, const std::string& src);

// Gemma 3's parts into c, after hf_config.cpp has read the LLaMA keys: (1 + w) norms, post norms,
// GeGLU, q/k norms, the sqrt(hidden) embedding scale, query_pre_attn_scalar, head_dim (default
// 256), attention_bias, rope_local_base_freq, linear rope_scaling, tied embeddings by default,
// and each layer's window (layer_types, else every sliding_window_pattern-th layer global).
void read_gemma3_config(const nlohmann::json& j, ModelConfig& c, const std::string& src);

// The keys read_gemma3_config reads, written back from c (replacing the source's).
void write_gemma3_keys(nlohmann::ordered_json& j, const ModelConfig& c);

// model_type "gemma3" is the multimodal Gemma3ForConditionalGeneration (text_config, vision
// tower, weights under language_model.): the one-line refusal that says what to give instead.
std::string gemma3_multimodal_refusal(const std::string& src);

}  // namespace mt
