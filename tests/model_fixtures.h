// Small models and batches shared by the model tests.
#pragma once
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/normal_init.h"
#include "model/transformer.h"

namespace mt::testing {

inline ModelConfig tiny_config(bool tied = false) {
  ModelConfig c;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.vocab_size = 32;
  c.max_position_embeddings = 16;
  c.rope_theta = 10000.0f;
  c.tie_word_embeddings = tied;
  return c;
}

// tiny_config with a family's parts (model/config.h), for the tests that run every family:
//   "qwen2"   q/k/v biases, tied embeddings, a window of 3 on the second layer only;
//   "qwen3"   q/k norms, head_dim 6 (not hidden_size / heads = 4);
//   "mistral" a window of 3 on every layer, head_dim 8;
//   "every"   all of them at once, with o and MLP biases too;
//   "gpt2"    GPT-2's block: LayerNorms with biases, a GeLU MLP (no gate), learned positions
//             (no RoPE), biases on every projection, tied embeddings, one KV head per head;
//   "gemma3"  Gemma 3's parts: (1 + w) norms, post norms, GeGLU, q/k norms, head_dim 8, tied
//             embeddings scaled by sqrt(hidden), an attention scale of 1/sqrt(5), a window of 3
//             with local RoPE base 100 on the first layer, the second global (theta 10000,
//             linear rope scaling 2).
inline ModelConfig family_config(const std::string& family) {
  ModelConfig c = tiny_config(family == "qwen2");
  c.model_type = family == "every" ? "llama" : family;
  if (family == "qwen2" || family == "every") c.qkv_bias = true;
  if (family == "qwen2") c.layer_window = {0, 3};
  if (family == "qwen3" || family == "every") c.qk_norm = true, c.head_dim_override = 6;
  if (family == "mistral") c.layer_window = {3, 3}, c.head_dim_override = 8;
  if (family == "every") c.o_bias = c.mlp_bias = true, c.layer_window = {2, 0};
  if (family == "gpt2") {
    c.norm = ModelConfig::Norm::layer, c.mlp = ModelConfig::Mlp::gelu;
    c.positions = ModelConfig::Positions::learned;
    c.qkv_bias = c.o_bias = c.mlp_bias = true;
    c.tie_word_embeddings = true, c.num_key_value_heads = c.num_attention_heads;
  }
  if (family == "gemma3") {
    c.tie_word_embeddings = true;
    c.qk_norm = true, c.head_dim_override = 8;
    c.norm_weight_offset = 1.0f, c.post_norms = true, c.geglu = true, c.scale_embeddings = true;
    c.attention_scale = 1.0f / std::sqrt(5.0f);
    c.layer_window = {3, 0}, c.rope_local_theta = 100.0f;
    c.rope_scaling.factor = 2.0f, c.rope_scaling.linear = true;
  }
  return c;
}
inline const char* const kFamilies[] = {"qwen2", "qwen3", "mistral", "every", "gpt2", "gemma3"};

struct TinyBatch {
  int64_t B = 2, T = 6;
  std::vector<int32_t> tokens, targets;
  ModelInput input() const {
    ModelInput in;
    in.tokens = tokens.data();
    in.targets = targets.data();
    in.B = B, in.T = T;
    return in;
  }
};

inline TinyBatch tiny_batch(int64_t vocab, uint64_t seed = 7, int64_t B = 2, int64_t T = 6) {
  TinyBatch b;
  b.B = B, b.T = T;
  std::mt19937 gen{uint32_t(seed)};
  for (int64_t i = 0; i < B * T; ++i) {
    b.tokens.push_back(int32_t(gen() % vocab));
    b.targets.push_back(int32_t(gen() % vocab));
  }
  b.targets[1] = -1;  // one ignored position exercises the loss mask
  return b;
}

// Replace every master value with a larger random one (and refresh compute copies), so that
// gradients are far above finite-difference noise.
inline void randomize(ParamStore& store, uint64_t seed, float std) {
  for (auto& p : store.params()) {
    if (!p.master) continue;
    fill_normal(p.master, p.numel, std, seed, p.name);
    if (p.shape.size() == 1)
      for (int64_t i = 0; i < p.numel; ++i) p.master[i] += 1.0f;
  }
  store.sync_compute();
}

}  // namespace mt::testing
