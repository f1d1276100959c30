#include "model/param_shapes.h"

#include "core/error.h"
#include "model/transformer.h"

namespace mt {

void check_lora_targets(const ModelConfig& c, const LoraConfig& lora) {
  if (lora.train_router && !c.moe())
    fail("lora.train_router: the " + c.model_type + " model has no router to train (not a mixture of experts)");
  // The head trained in full and by an adapter at once has no one PEFT form (the copy wraps the
  // module the adapter sits on).
  if (lora.train_embeddings && lora_targets_head(lora))
    fail("lora.targets: lm_head cannot take an adapter while the embedding and head are trained in full "
         "(data.add_tokens under LoRA); leave lm_head out of lora.targets");
  // GPT-2's adapters are PEFT's on its modules (c_attn fused): they are named so, and only GPT-2's
  // modules are named so. (The names, not the math, depend on model_type: the HF layout does.)
  const bool gpt2 = c.model_type == "gpt2";
  for (const std::string& t : lora.targets) {
    const bool module = t == "c_attn" || t == "c_proj" || t == "c_fc";
    if (t == "lm_head" || module == gpt2) continue;
    fail(gpt2 ? "lora.targets: '" + t + "' is not a GPT-2 module; GPT-2's are c_attn (q, k, v), c_proj (o and the MLP's down) and c_fc (the MLP's up), and lm_head"
              : "lora.targets: '" + t + "' names a GPT-2 module, and this is a " + c.model_type +
                    " model; give its projections (q, k, v, o, gate, up, down, lm_head)");
  }
}

bool quantized_in_qlora(const ParamShape& p) {
  return !p.adapter && p.shape.size() == 2 && p.name.rfind("model.layers.", 0) == 0 && !moe_router_param(p.name);
}

std::vector<ParamShape> llama_param_shapes(const ModelConfig& c, const LoraConfig& lora) {
  c.validate();
  const int64_t C = c.hidden_size;
  std::vector<ParamShape> out;
  out.push_back({kEmbedName, {c.vocab_size, C}});
  if (c.learned_positions()) out.push_back({kPositionEmbedName, {c.max_position_embeddings, C}});
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    out.push_back({layer_prefix(l) + "input_layernorm.weight", {C}});
    out.push_back({layer_prefix(l) + "post_attention_layernorm.weight", {C}});
    if (c.post_norms) {  // Gemma's four norms, in its modeling code's order
      out.push_back({layer_prefix(l) + "pre_feedforward_layernorm.weight", {C}});
      out.push_back({layer_prefix(l) + "post_feedforward_layernorm.weight", {C}});
    }
    if (c.layer_norm()) {
      out.push_back({layer_prefix(l) + "input_layernorm.bias", {C}});
      out.push_back({layer_prefix(l) + "post_attention_layernorm.bias", {C}});
    }
    const bool moe = c.moe_layer(l);  // the experts replace gate, up and down
    auto has = [&](int p) { return proj_exists(Proj(p), c) && !(moe && p >= kGate); };
    for (int p = 0; p < kNumProj; ++p) {
      if (!has(p)) continue;
      auto [o, i] = proj_dims(Proj(p), c);
      out.push_back({proj_param_name(l, Proj(p)) + ".weight", {o, i}});
    }
    // After every matrix, so q, k and v stay adjacent (one fused GEMM: fuse_qkv_if_adjacent).
    for (int p = 0; p < kNumProj; ++p)
      if (has(p) && proj_has_bias(Proj(p), c))
        out.push_back({proj_param_name(l, Proj(p)) + ".bias", {proj_dims(Proj(p), c).first}});
    if (moe) {  // the router, then each projection's experts in order (a stack per projection)
      out.push_back({moe_router_name(l, c), {c.num_experts, C}});
      for (int p = 0; p < kNumExpertProj; ++p)
        for (int64_t e = c.moe_expert_begin; e < c.moe_expert_begin + c.local_experts(); ++e) {
          auto [o, i] = expert_proj_dims(ExpertProj(p), c);
          out.push_back({expert_param_name(l, e, ExpertProj(p), c) + ".weight", {o, i}, false, e, c.num_experts});
        }
    }
    if (c.qk_norm) {
      out.push_back({head_norm_name(l, kQ), {c.q_norm_width()}});
      out.push_back({head_norm_name(l, kK), {c.k_norm_width()}});
    }
  }
  out.push_back({kFinalNormName, {C}});
  if (c.layer_norm()) out.push_back({std::string(kFinalNormPrefix) + ".bias", {C}});
  if (!c.tie_word_embeddings) out.push_back({kHeadName, {c.vocab_size, C}});
  if (!lora.enabled) return out;
  check_lora_targets(c, lora);
  const auto on = lora_targets_mask(lora);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const bool moe = c.moe_layer(l);
    for (int p = 0; p < kNumProj; ++p) {
      if (!on[p] || !proj_exists(Proj(p), c) || (moe && p >= kGate)) continue;
      auto [o, i] = proj_dims(Proj(p), c);
      // GPT-2's c_attn: one A (declared with q's adapter) that k and v share.
      const bool shared_a = lora_fuses_qkv(lora) && (p == kK || p == kV);
      if (!shared_a) out.push_back({lora_a_name(l, Proj(p), lora), {lora.rank, i}, true});
      out.push_back({proj_param_name(l, Proj(p)) + ".lora_B.weight", {o, lora.rank}, true});
    }
    if (!moe) continue;
    if (lora.train_router) out.push_back({moe_router_copy_name(l, c), {c.num_experts, c.hidden_size}, true});
    // Every expert's gate, up and down where lora.targets names them (PEFT puts its adapters on
    // each expert's modules).
    const bool expert_on[kNumExpertProj] = {on[kGate], on[kUp], on[kDown]};
    for (int p = 0; p < kNumExpertProj; ++p)
      for (int64_t e = c.moe_expert_begin; expert_on[p] && e < c.moe_expert_begin + c.local_experts(); ++e) {
        auto [o, i] = expert_proj_dims(ExpertProj(p), c);
        const std::string name = expert_param_name(l, e, ExpertProj(p), c);
        out.push_back({name + ".lora_A.weight", {lora.rank, i}, true, e, c.num_experts});
        out.push_back({name + ".lora_B.weight", {o, lora.rank}, true, e, c.num_experts});
      }
  }
  if (lora.train_embeddings) {  // the embedding's (and an untied head's) trained copies
    out.push_back({kEmbedCopyName, {c.vocab_size, C}, true});
    if (!c.tie_word_embeddings) out.push_back({kHeadCopyName, {c.vocab_size, C}, true});
  }
  if (lora_targets_head(lora)) {
    out.push_back({"lm_head.lora_A.weight", {lora.rank, C}, true});
    out.push_back({"lm_head.lora_B.weight", {c.vocab_size, lora.rank}, true});
  }
  return out;
}

}  // namespace mt
