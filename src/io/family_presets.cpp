#include "io/family_presets.h"

#include "core/error.h"
#include "io/hf_config.h"
#include "model/presets.h"

namespace mt {

// The keys below are copied from each repository's config.json on huggingface.co
// (https://huggingface.co/<source>/blob/main/config.json), only those that shape the model; the
// published figure is the parameter count its model card (or the Hub's safetensors summary)
// prints. tests/test_family_presets.cpp checks the exact counts against a hand count and the
// published figure.
const std::vector<FamilyPreset>& family_presets() {
  static const std::vector<FamilyPreset> presets = {
      {"qwen2.5-0.5b", "Qwen/Qwen2.5-0.5B", "0.49B", R"({
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
        "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
        "num_attention_heads": 14, "num_key_value_heads": 2, "vocab_size": 151936,
        "max_position_embeddings": 32768, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
        "sliding_window": 32768, "use_sliding_window": false, "max_window_layers": 24,
        "tie_word_embeddings": true})"},
      {"qwen2.5-7b", "Qwen/Qwen2.5-7B", "7.61B", R"({
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
        "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
        "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064,
        "max_position_embeddings": 131072, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
        "sliding_window": 131072, "use_sliding_window": false, "max_window_layers": 28,
        "tie_word_embeddings": false})"},
      {"qwen2.5-72b", "Qwen/Qwen2.5-72B", "72.7B", R"({
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
        "hidden_size": 8192, "intermediate_size": 29568, "num_hidden_layers": 80,
        "num_attention_heads": 64, "num_key_value_heads": 8, "vocab_size": 152064,
        "max_position_embeddings": 131072, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0,
        "sliding_window": 131072, "use_sliding_window": false, "max_window_layers": 80,
        "tie_word_embeddings": false})"},
      {"qwen3-0.6b", "Qwen/Qwen3-0.6B", "0.6B", R"({
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
        "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28,
        "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
        "max_position_embeddings": 40960, "rms_norm_eps": 1e-06, "rope_theta": 1000000,
        "attention_bias": false, "sliding_window": null, "use_sliding_window": false,
        "max_window_layers": 28, "tie_word_embeddings": true})"},
      {"qwen3-8b", "Qwen/Qwen3-8B", "8.2B", R"({
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
        "hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 36,
        "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
        "max_position_embeddings": 40960, "rms_norm_eps": 1e-06, "rope_theta": 1000000,
        "attention_bias": false, "sliding_window": null, "use_sliding_window": false,
        "max_window_layers": 36, "tie_word_embeddings": false})"},
      {"qwen3-32b", "Qwen/Qwen3-32B", "32.8B", R"({
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
        "hidden_size": 5120, "intermediate_size": 25600, "num_hidden_layers": 64,
        "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
        "max_position_embeddings": 40960, "rms_norm_eps": 1e-06, "rope_theta": 1000000,
        "attention_bias": false, "sliding_window": null, "use_sliding_window": false,
        "max_window_layers": 64, "tie_word_embeddings": false})"},
      // v0.1: every layer attends to the last 4096 positions.
      {"mistral-7b", "mistralai/Mistral-7B-v0.1", "7.24B", R"({
        "architectures": ["MistralForCausalLM"], "model_type": "mistral",
        "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000,
        "max_position_embeddings": 32768, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
        "sliding_window": 4096, "tie_word_embeddings": false})"},
      // v0.3: no window, 768 more tokens (control tokens), RoPE base 1e6.
      {"mistral-7b-v0.3", "mistralai/Mistral-7B-v0.3", "7.25B", R"({
        "architectures": ["MistralForCausalLM"], "model_type": "mistral",
        "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32768,
        "max_position_embeddings": 32768, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0,
        "sliding_window": null, "tie_word_embeddings": false})"},
      // Nemo: 32 heads of 128 (4096 wide) on a 5120-wide residual stream.
      {"mistral-nemo-12b", "mistralai/Mistral-Nemo-Base-2407", "12.2B", R"({
        "architectures": ["MistralForCausalLM"], "model_type": "mistral",
        "hidden_size": 5120, "intermediate_size": 14336, "num_hidden_layers": 40,
        "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 131072,
        "max_position_embeddings": 1024000, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0,
        "sliding_window": null, "tie_word_embeddings": false})"},
  };
  return presets;
}

std::vector<std::string> family_preset_names() {
  std::vector<std::string> names;
  for (const auto& p : family_presets()) names.push_back(p.name);
  return names;
}

const FamilyPreset* find_family_preset(const std::string& name) {
  for (const auto& p : family_presets())
    if (name == p.name) return &p;
  return nullptr;
}

std::vector<std::string> published_preset_names() {
  auto names = llama_preset_names();
  for (auto& n : family_preset_names()) names.push_back(std::move(n));
  return names;
}

ModelConfig family_preset(const std::string& name) {
  const FamilyPreset* p = find_family_preset(name);
  if (!p) {
    std::string known;
    for (const auto& n : family_preset_names()) known += (known.empty() ? "" : ", ") + n;
    fail("unknown family preset '" + name + "' (expected " + known + ")");
  }
  return parse_hf_config(p->config_json, std::string("preset ") + p->name + " (" + p->source + " config.json)");
}

ModelConfig published_preset(const std::string& name) {
  if (find_family_preset(name)) return family_preset(name);
  for (const auto& n : llama_preset_names())
    if (n == name) return llama_preset(name);
  std::string known;
  for (const auto& n : published_preset_names()) known += (known.empty() ? "" : ", ") + n;
  fail("unknown model preset '" + name + "' (expected " + known + ")");
}

}  // namespace mt
