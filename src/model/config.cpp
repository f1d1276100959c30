#include "model/config.h"

#include <cmath>
#include <limits>

#include "core/error.h"

namespace mt {

namespace {

// Sizes whose byte counts the engine could not represent are refused before anything is sized
// from them: every count is an int64, and sums of them must not overflow either, so no part of
// the model may pass 2^62 bytes. Training holds up to 18 bytes per parameter (bf16 copy, f32
// master, gradient, Adam m and v). Token ids and RoPE positions are 32-bit.
constexpr double kMaxBytes = double(int64_t(1) << 62);
constexpr double kTrainingBytesPerParam = 18.0;
constexpr int64_t kMaxId = std::numeric_limits<int32_t>::max();
// Every layer is a set of named tensors the engine lists one by one (names, views, FSDP units):
// about a kilobyte of bookkeeping per layer before any weight, so a layer count from a corrupt
// file must be refused before it is listed. Published models have a few hundred layers.
constexpr int64_t kMaxLayers = int64_t(1) << 20;

void refuse_past(double bytes, const char* key, int64_t value, const char* what) {
  if (bytes > kMaxBytes)
    fail(std::string("model.") + key + " (" + std::to_string(value) + ") is too large: " + what +
         " would pass 2^62 bytes, past what 64-bit byte counts hold");
}

}  // namespace

void use_gpt2_block(ModelConfig& c) {
  c.model_type = "gpt2";
  c.norm = ModelConfig::Norm::layer;
  c.mlp = ModelConfig::Mlp::gelu;
  c.positions = ModelConfig::Positions::learned;
  c.qkv_bias = c.o_bias = c.mlp_bias = true;
  c.num_key_value_heads = c.num_attention_heads;
  c.tie_word_embeddings = true;
}

void ModelConfig::validate() const {
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
  if (vocab_size > kMaxId)
    fail("model.vocab_size (" + std::to_string(vocab_size) + ") is too large: token ids are 32-bit (at most " +
         std::to_string(kMaxId) + ")");
  if (max_position_embeddings > kMaxId)
    fail("model.max_position_embeddings (" + std::to_string(max_position_embeddings) +
         ") is too large: positions are 32-bit (at most " + std::to_string(kMaxId) + ")");
  if (num_hidden_layers > kMaxLayers)
    fail("model.num_hidden_layers (" + std::to_string(num_hidden_layers) + ") is too large: at most " +
         std::to_string(kMaxLayers) + " layers");
  // In the order a reader looks for the culprit: the width first, then what multiplies it.
  const double C = double(hidden_size), I = double(intermediate_size), per = kTrainingBytesPerParam;
  refuse_past(per * C * C, "hidden_size", hidden_size, "one attention projection's training state");
  refuse_past(per * C * I, "intermediate_size", intermediate_size, "one MLP projection's training state");
  refuse_past(per * C * double(vocab_size), "vocab_size", vocab_size, "the embedding's training state");
  refuse_past(per * double(num_hidden_layers) * (4.0 * C * C + 3.0 * C * I), "num_hidden_layers",
              num_hidden_layers, "the layers' training state");
  // An explicit head_dim (Qwen3, Mistral Nemo) sizes q, k, v and o apart from hidden_size.
  if (head_dim_override > 0)
    refuse_past(per * C * double(head_dim_override) * double(num_attention_heads), "head_dim",
                head_dim_override, "the attention projections' training state");
  // f32 cos and sin tables of max_position_embeddings x head_dim / 2 (head_dim <= hidden_size).
  refuse_past(4.0 * double(max_position_embeddings) * C, "max_position_embeddings", max_position_embeddings,
              "the RoPE tables");
  if (head_dim_override <= 0 && hidden_size % num_attention_heads != 0)
    fail("model.num_attention_heads (" + std::to_string(num_attention_heads) +
         ") must divide model.hidden_size (" + std::to_string(hidden_size) + ")");
  if (num_attention_heads % num_key_value_heads != 0)
    fail("model.num_key_value_heads (" + std::to_string(num_key_value_heads) +
         ") must divide model.num_attention_heads (" + std::to_string(num_attention_heads) + ")");
  if (head_dim() % 2 != 0)
    fail("model head_dim (" + std::to_string(head_dim()) +
         ") must be even for rotary embeddings");
  if (!layer_window.empty() && int64_t(layer_window.size()) != num_hidden_layers)
    fail("model layer windows: " + std::to_string(layer_window.size()) + " given for " +
         std::to_string(num_hidden_layers) + " layers");
  for (int64_t w : layer_window)
    if (w < 0) fail("model sliding_window must be >= 0, got " + std::to_string(w));
  if (qk_norm_whole && !qk_norm) fail("model: a whole-projection q/k norm (OLMoE's) needs qk_norm");
  if (num_experts < 0) fail("model.num_experts must be >= 0 (0: a dense model), got " + std::to_string(num_experts));
  if (num_experts > 0) {
    if (num_experts > (int64_t(1) << 16))
      fail("model.num_experts (" + std::to_string(num_experts) + ") is too large: at most 65536");
    if (num_experts_per_tok < 1 || num_experts_per_tok > num_experts)
      fail("model.num_experts_per_tok must be in [1, num_experts (" + std::to_string(num_experts) + ")], got " +
           std::to_string(num_experts_per_tok));
    positive(moe_intermediate_size, "moe_intermediate_size");
    positive(decoder_sparse_step, "decoder_sparse_step");
    if (gelu_mlp() || geglu) fail("model: the experts are SwiGLU MLPs; not with a GeLU or GeGLU MLP");
    const double Ie = double(moe_intermediate_size), E = double(num_experts);
    refuse_past(per * C * Ie, "moe_intermediate_size", moe_intermediate_size, "one expert projection's training state");
    refuse_past(per * double(num_hidden_layers) * 3.0 * C * Ie * E, "num_experts", num_experts,
                "the experts' training state");
    for (int64_t l : mlp_only_layers)
      if (l < 0 || l >= num_hidden_layers)
        fail("model.mlp_only_layers: layer " + std::to_string(l) + " is not in [0, " +
             std::to_string(num_hidden_layers) + ")");
    if (!(router_aux_loss_coef >= 0.0f) || !std::isfinite(router_aux_loss_coef))
      fail("model.router_aux_loss_coef must be finite and >= 0");
    if (!(router_z_loss_coef >= 0.0f) || !std::isfinite(router_z_loss_coef))
      fail("model.router_z_loss_coef must be finite and >= 0");
    if (!(moe_capacity_factor >= 0.0f) || !std::isfinite(moe_capacity_factor) || moe_capacity_factor > 1e6f)
      fail("model.moe_capacity_factor must be >= 0 (0: dropless) and finite");
  }
  if (!(rms_norm_eps > 0.0f)) fail("model.rms_norm_eps must be > 0");
  if (!std::isfinite(norm_weight_offset)) fail("model norm weight offset must be finite");
  // Gemma 3's parts are RMSNorm / gated-MLP choices: not combined with GPT-2's LayerNorm or GeLU MLP.
  if (layer_norm() && (post_norms || norm_weight_offset != 0.0f))
    fail("model post norms and a norm weight offset are RMSNorm's (Gemma 3), not LayerNorm's");
  if (gelu_mlp() && geglu) fail("model geglu is a gated MLP: not with the GeLU MLP (GPT-2's)");
  if (!(attention_scale >= 0.0f) || !std::isfinite(attention_scale))
    fail("model attention scale (query_pre_attn_scalar^-1/2) must be finite and >= 0");
  if (!(rope_local_theta >= 0.0f) || !std::isfinite(rope_local_theta))
    fail("model local RoPE base (rope_local_base_freq) must be finite and >= 0");
  if (!(rope_theta > 0.0f)) fail("model.rope_theta must be > 0");
  if (rope_scaling.factor < 0.0f) fail("model.rope_scaling.factor must be >= 0");
  if (rope_scaling.factor > 0.0f && rope_scaling.original_max_position_embeddings <= 0)
    fail("model.rope_scaling.original_max_position_embeddings must be > 0 when scaling, got " +
         std::to_string(rope_scaling.original_max_position_embeddings));
  if (rope_scaling.factor > 0.0f && !(rope_scaling.high_freq_factor > rope_scaling.low_freq_factor))
    fail("model.rope_scaling.high_freq_factor must be > low_freq_factor");
}

}  // namespace mt
