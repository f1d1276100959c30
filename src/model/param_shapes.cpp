#include "model/param_shapes.h"

#include "model/llama.h"

namespace mt {
std::vector<ParamShape> llama_param_shapes(const LlamaConfig& c, const LoraConfig& lora) {
  c.validate();
  const int64_t C = c.hidden_size;
  std::vector<ParamShape> out;
  out.push_back({kEmbedName, {c.vocab_size, C}});
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    out.push_back({layer_prefix(l) + "input_layernorm.weight", {C}});
    out.push_back({layer_prefix(l) + "post_attention_layernorm.weight", {C}});
    if (c.post_norms) {  // Gemma's four norms, in its modeling code's order
      out.push_back({layer_prefix(l) + "pre_feedforward_layernorm.weight", {C}});
      out.push_back({layer_prefix(l) + "post_feedforward_layernorm.weight", {C}});
    }
    for (int p = 0; p < kNumProj; ++p) {
      auto [o, i] = proj_dims(Proj(p), c);
      out.push_back({proj_param_name(l, Proj(p)) + ".weight", {o, i}});
    }
    // After every matrix, so q, k and v stay adjacent (one fused GEMM: fuse_qkv_if_adjacent).
    for (int p = 0; p < kNumProj; ++p)
      if (proj_has_bias(Proj(p), c))
        out.push_back({proj_param_name(l, Proj(p)) + ".bias", {proj_dims(Proj(p), c).first}});
    if (c.qk_norm) {
      out.push_back({head_norm_name(l, kQ), {c.head_dim()}});
      out.push_back({head_norm_name(l, kK), {c.head_dim()}});
    }
  }
  out.push_back({kFinalNormName, {C}});
  if (!c.tie_word_embeddings) out.push_back({kHeadName, {c.vocab_size, C}});
  if (!lora.enabled) return out;
  const auto on = lora_targets_mask(lora);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    for (int p = 0; p < kNumProj; ++p) {
      if (!on[p]) continue;
      auto [o, i] = proj_dims(Proj(p), c);
      out.push_back({proj_param_name(l, Proj(p)) + ".lora_A.weight", {lora.rank, i}, true});
      out.push_back({proj_param_name(l, Proj(p)) + ".lora_B.weight", {o, lora.rank}, true});
    }
  if (lora_targets_head(lora)) {
    out.push_back({"lm_head.lora_A.weight", {lora.rank, C}, true});
    out.push_back({"lm_head.lora_B.weight", {c.vocab_size, lora.rank}, true});
  }
  return out;
}

}  // namespace mt
