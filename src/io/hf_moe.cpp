#include "io/hf_moe.h"

#include "core/clipped.h"
#include "core/error.h"
#include "io/hf_json_keys.h"

namespace mt {

using hf_json::read_key;
using hf_json::set_true;

bool is_moe_model_type(const std::string& t) { return t == "mixtral" || t == "qwen3_moe" || t == "olmoe"; }

std::string unsupported_moe_reason(const std::string& t, const std::string& src) {
  if (t == "qwen2_moe")
    return src + ": model_type 'qwen2_moe' is not supported: its shared expert "
                 "(shared_expert_intermediate_size) is not implemented; mixtral, qwen3_moe and olmoe are";
  if (t == "deepseek_v2" || t == "deepseek_v3")
    return src + ": model_type '" + t + "' is not supported: multi-head latent attention and grouped "
           "routing (n_group, topk_group) are not implemented; mixtral, qwen3_moe and olmoe are";
  if (t == "gpt_oss" || t == "dbrx" || t == "jamba" || t == "granitemoe" || t == "phimoe")
    return src + ": model_type '" + t + "' (a mixture of experts) is not supported; mixtral, qwen3_moe and olmoe are";
  return "";
}

void read_moe_config(const nlohmann::json& j, ModelConfig& c, const std::string& src) {
  const bool mixtral = c.model_type == "mixtral";
  if (mixtral) {
    // Every layer is sparse; the experts are intermediate_size wide; the chosen k renormalised.
    read_key(j, "num_local_experts", c.num_experts, src, true);
    c.num_experts_per_tok = 2;  // MixtralConfig's default
    c.moe_intermediate_size = c.intermediate_size;
    c.norm_topk_prob = true;
    double jitter = 0.0;
    read_key(j, "router_jitter_noise", jitter, src, false);
    if (jitter != 0.0)
      fail(src + ": router_jitter_noise " + clipped(j["router_jitter_noise"].dump()) +
           " is not supported (meshtrain's router adds no noise; set it to 0)");
  } else if (c.model_type == "olmoe") {
    // Every layer sparse, the experts intermediate_size wide, the chosen weights left as they are
    // by default; q and k normalised over their whole projections (OlmoeRMSNorm(hidden_size)).
    c.num_experts = 64, c.num_experts_per_tok = 8;  // OlmoeConfig's defaults
    read_key(j, "num_experts", c.num_experts, src, false);
    c.moe_intermediate_size = c.intermediate_size;
    c.norm_topk_prob = false;
    read_key(j, "norm_topk_prob", c.norm_topk_prob, src, false);
    c.qk_norm = c.qk_norm_whole = true;
    if (set_true(j, "clip_qkv"))
      fail(src + ": clip_qkv " + clipped(j["clip_qkv"].dump()) + " is not supported (meshtrain does not clamp q, k, v)");
  } else {
    read_key(j, "num_experts", c.num_experts, src, true);
    c.num_experts_per_tok = 8;  // Qwen3MoeConfig's defaults
    read_key(j, "moe_intermediate_size", c.moe_intermediate_size, src, true);
    c.norm_topk_prob = false;
    read_key(j, "norm_topk_prob", c.norm_topk_prob, src, false);
    read_key(j, "decoder_sparse_step", c.decoder_sparse_step, src, false);
    if (j.contains("mlp_only_layers") && !j["mlp_only_layers"].is_null()) {
      const auto& list = j["mlp_only_layers"];
      if (!list.is_array()) fail(src + ": mlp_only_layers must be a list of layer indices");
      for (const auto& l : list) {
        if (!l.is_number_integer()) fail(src + ": mlp_only_layers must be a list of layer indices");
        c.mlp_only_layers.push_back(l.get<int64_t>());
      }
    }
    if (set_true(j, "shared_expert_intermediate_size"))
      fail(src + ": shared_expert_intermediate_size: a shared expert is not implemented");
  }
  if (c.num_experts <= 0)
    fail(src + ": " + (mixtral ? "num_local_experts" : "num_experts") + " must be > 0, got " +
         std::to_string(c.num_experts));
  read_key(j, "num_experts_per_tok", c.num_experts_per_tok, src, false);
  c.router_aux_loss_coef = 0.001f;  // both configs' default
  read_key(j, "router_aux_loss_coef", c.router_aux_loss_coef, src, false);
  read_key(j, "output_router_logits", c.output_router_logits, src, false);
}

void write_moe_keys(nlohmann::ordered_json& j, const ModelConfig& c) {
  if (c.model_type == "mixtral") {
    j["num_local_experts"] = c.num_experts;
  } else if (c.model_type == "olmoe") {
    j["num_experts"] = c.num_experts;
    j["norm_topk_prob"] = c.norm_topk_prob;
    j["clip_qkv"] = nullptr;
  } else {
    j["num_experts"] = c.num_experts;
    j["moe_intermediate_size"] = c.moe_intermediate_size;
    j["norm_topk_prob"] = c.norm_topk_prob;
    j["decoder_sparse_step"] = c.decoder_sparse_step;
    j["mlp_only_layers"] = c.mlp_only_layers;
  }
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  j["output_router_logits"] = c.output_router_logits;
  j["router_aux_loss_coef"] = hf_json::short_decimal(c.router_aux_loss_coef);  // 0.001, not its double
}

}  // namespace mt
