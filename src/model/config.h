// The LLaMA architecture's hyper-parameters, named as in HF's config.json.
#pragma once
#include <cstdint>
#include <string>

#include "core/rope_frequencies.h"

namespace mt {

struct LlamaConfig {
  int64_t hidden_size = 256;
  int64_t intermediate_size = 688;
  int64_t num_hidden_layers = 4;
  int64_t num_attention_heads = 8;
  int64_t num_key_value_heads = 4;
  int64_t vocab_size = 256;
  int64_t max_position_embeddings = 2048;
  float rms_norm_eps = 1e-5f;
  float rope_theta = 500000.0f;
  RopeScaling rope_scaling;  // factor 0: no scaling
  bool tie_word_embeddings = false;
  // 0: hidden_size / num_attention_heads (every LLaMA). Set when the heads do not span the hidden
  // size, as in a tensor-parallel rank's share of the model (its heads, the full hidden size).
  int64_t head_dim_override = 0;

  int64_t head_dim() const { return head_dim_override > 0 ? head_dim_override : hidden_size / num_attention_heads; }
  int64_t q_dim() const { return head_dim() * num_attention_heads; }  // query / attention width
  int64_t kv_dim() const { return head_dim() * num_key_value_heads; }

  // Throws mt::Error naming the offending key when the shape is inconsistent
  // (heads not dividing hidden size, KV heads not dividing heads, odd head_dim, sizes <= 0).
  void validate() const;
};

}  // namespace mt
