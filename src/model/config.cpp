#include "model/config.h"

#include "core/error.h"

namespace mt {

void LlamaConfig::validate() const {
  auto positive = [](int64_t v, const char* key) {
    if (v <= 0) fail(std::string("model.") + key + " must be > 0, got " + std::to_string(v));
  };
  positive(hidden_size, "hidden_size");
  positive(intermediate_size, "intermediate_size");
  positive(num_hidden_layers, "num_hidden_layers");
  positive(num_attention_heads, "num_attention_heads");
  positive(num_key_value_heads, "num_key_value_heads");
  positive(vocab_size, "vocab_size");
  positive(max_position_embeddings, "max_position_embeddings");
  if (head_dim_override <= 0 && hidden_size % num_attention_heads != 0)
    fail("model.num_attention_heads (" + std::to_string(num_attention_heads) +
         ") must divide model.hidden_size (" + std::to_string(hidden_size) + ")");
  if (num_attention_heads % num_key_value_heads != 0)
    fail("model.num_key_value_heads (" + std::to_string(num_key_value_heads) +
         ") must divide model.num_attention_heads (" + std::to_string(num_attention_heads) + ")");
  if (head_dim() % 2 != 0)
    fail("model head_dim (" + std::to_string(head_dim()) +
         ") must be even for rotary embeddings");
  if (!(rms_norm_eps > 0.0f)) fail("model.rms_norm_eps must be > 0");
  if (!(rope_theta > 0.0f)) fail("model.rope_theta must be > 0");
  if (rope_scaling.factor < 0.0f) fail("model.rope_scaling.factor must be >= 0");
  if (rope_scaling.factor > 0.0f && rope_scaling.original_max_position_embeddings <= 0)
    fail("model.rope_scaling.original_max_position_embeddings must be > 0 when scaling, got " +
         std::to_string(rope_scaling.original_max_position_embeddings));
  if (rope_scaling.factor > 0.0f && !(rope_scaling.high_freq_factor > rope_scaling.low_freq_factor))
    fail("model.rope_scaling.high_freq_factor must be > low_freq_factor");
}

}  // namespace mt
