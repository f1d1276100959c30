#include "model/presets.h"

#include <cmath>

#include "core/error.h"

namespace mt {
namespace {

// Keys checked on 2026-12-03 against Lightning-AI/litgpt litgpt/config.py's copies of
// meta-llama/Meta-Llama-3.1-{8B,70B,405B} config.json: rope_theta 500000, rope_scaling 8 / 1 / 4 /
// 8192, 131072 positions, vocab 128256, eps 1e-5 (docs/planner.md "The presets, checked").
ModelConfig llama31(int64_t hidden, int64_t inter, int64_t layers, int64_t heads) {
  ModelConfig c;
  c.hidden_size = hidden;
  c.intermediate_size = inter;
  c.num_hidden_layers = layers;
  c.num_attention_heads = heads;
  c.num_key_value_heads = 8;
  c.vocab_size = 128256;
  c.max_position_embeddings = 131072;
  c.rms_norm_eps = 1e-5f;
  c.rope_theta = 500000.0f;
  c.rope_scaling = {8.0f, 1.0f, 4.0f, 8192};
  c.tie_word_embeddings = false;
  return c;
}

// A Gemma 3 text model: head_dim 256 and query_pre_attn_scalar 256 unless given, RoPE theta 1e6
// on the global layers (every sixth; linear scaling 8 beyond 1B) and 10000 on the sliding ones.
// Keys checked on 2026-12-03 against public copies of google/gemma-3-{1b,4b,27b} config.json (the
// Megatron-Bridge Gemma 3 bridge's test fixtures: 1B 32768 positions, window 512, no scaling,
// vocab 262144; 4B+ 131072, window 1024, linear 8, vocab 262208; 27B head_dim 128, scalar 168), 12B's
// text_config in an unsloth copy, and litgpt/config.py.
ModelConfig gemma3_text_preset(int64_t hidden, int64_t inter, int64_t layers, int64_t heads, int64_t kv_heads,
                               int64_t window, int64_t vocab, int64_t max_pos, float scaling,
                               int64_t head_dim = 256, double query_pre_attn_scalar = 256.0) {
  ModelConfig c;
  give_gemma3_parts(c);
  c.hidden_size = hidden, c.intermediate_size = inter, c.num_hidden_layers = layers;
  c.num_attention_heads = heads, c.num_key_value_heads = kv_heads, c.head_dim_override = head_dim;
  c.vocab_size = vocab, c.max_position_embeddings = max_pos, c.tie_word_embeddings = true;
  c.rms_norm_eps = 1e-6f, c.rope_theta = 1000000.0f, c.rope_local_theta = 10000.0f;
  if (scaling > 0.0f) c.rope_scaling.factor = scaling, c.rope_scaling.linear = true;
  c.attention_scale = float(1.0 / std::sqrt(query_pre_attn_scalar));
  for (int64_t l = 0; l < layers; ++l) c.layer_window.push_back((l + 1) % 6 != 0 ? window : 0);
  return c;
}

// OpenAI's GPT-2 sizes (vocab 50257, 1024 positions, MLP 4 x hidden). Checked on 2026-12-03 against
// copies of openai-community/gpt2 and gpt2-xl config.json (n_positions 1024, layer_norm_epsilon
// 1e-05, gelu_new, vocab 50257).
ModelConfig gpt2(int64_t layers, int64_t hidden, int64_t heads) {
  ModelConfig c;
  c.hidden_size = hidden;
  c.intermediate_size = 4 * hidden;
  c.num_hidden_layers = layers;
  c.num_attention_heads = heads;
  c.vocab_size = 50257;
  c.max_position_embeddings = 1024;
  use_gpt2_block(c);
  return c;
}

}  // namespace

void give_gemma3_parts(ModelConfig& c) {
  c.model_type = "gemma3_text";
  c.norm_weight_offset = 1.0f;
  c.post_norms = c.geglu = c.scale_embeddings = c.qk_norm = true;
}

std::vector<std::string> llama_preset_names() {
  return {"llama3-8b", "llama3-70b", "llama3-405b", "reference", "gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl",
          "gemma3-1b", "gemma3-4b", "gemma3-12b", "gemma3-27b"};
}

ModelConfig llama_preset(const std::string& name) {
  if (name == "llama3-8b") return llama31(4096, 14336, 32, 32);
  if (name == "llama3-70b") return llama31(8192, 28672, 80, 64);
  if (name == "llama3-405b") return llama31(16384, 53248, 126, 128);
  if (name == "gemma3-1b") return gemma3_text_preset(1152, 6912, 26, 4, 1, 512, 262144, 32768, 0.0f);
  if (name == "gemma3-4b") return gemma3_text_preset(2560, 10240, 34, 8, 4, 1024, 262208, 131072, 8.0f);
  if (name == "gemma3-12b") return gemma3_text_preset(3840, 15360, 48, 16, 8, 1024, 262208, 131072, 8.0f);
  if (name == "gemma3-27b") return gemma3_text_preset(5376, 21504, 62, 32, 16, 1024, 262208, 131072, 8.0f, 128, 168.0);
  if (name == "gpt2") return gpt2(12, 768, 12);  // 124,439,808 parameters
  if (name == "gpt2-medium") return gpt2(24, 1024, 16);
  if (name == "gpt2-large") return gpt2(36, 1280, 20);
  if (name == "gpt2-xl") return gpt2(48, 1600, 25);
  if (name == "reference") {  // the engine's benchmark shape (meshtrain bench, configs/reference.toml)
    ModelConfig c;
    c.hidden_size = 768, c.intermediate_size = 2048, c.num_hidden_layers = 12;
    c.num_attention_heads = 12, c.num_key_value_heads = 4, c.vocab_size = 32000;
    c.max_position_embeddings = 2048, c.tie_word_embeddings = false;
    return c;
  }
  fail("unknown model preset '" + name +
       "' (expected llama3-8b, llama3-70b, llama3-405b, reference, gpt2, gpt2-medium, gpt2-large, gpt2-xl, "
       "gemma3-1b, gemma3-4b, gemma3-12b or gemma3-27b)");
}

}  // namespace mt
