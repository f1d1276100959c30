#include "train/model_identity.h"

#include <cstdio>
#include <map>

#include "core/clipped.h"
#include "core/crc32c.h"
#include "core/error.h"

namespace mt {

namespace {

// Exactly (all nine significant digits of a float), so that equal texts mean equal values.
std::string exact(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", double(v));
  return buf;
}

std::string list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(v[i]);
  }
  return s + "]";
}

}  // namespace

std::vector<std::pair<std::string, std::string>> model_identity(const ModelConfig& c, const Tokenizer& tok) {
  const RopeScaling& rs = c.rope_scaling;
  const auto b = [](bool v) { return std::string(v ? "true" : "false"); };
  const auto n = [](int64_t v) { return std::to_string(v); };
  std::vector<std::pair<std::string, std::string>> out = {
      {"model_type", c.model_type},
      {"hidden_size", n(c.hidden_size)},
      {"intermediate_size", n(c.intermediate_size)},
      {"num_hidden_layers", n(c.num_hidden_layers)},
      {"num_attention_heads", n(c.num_attention_heads)},
      {"num_key_value_heads", n(c.num_key_value_heads)},
      {"head_dim", n(c.head_dim())},
      {"vocab_size", n(c.vocab_size)},
      {"max_position_embeddings", n(c.max_position_embeddings)},
      {"rms_norm_eps", exact(c.rms_norm_eps)},
      {"rope_theta", exact(c.rope_theta)},
      {"rope_scaling", exact(rs.factor) + ", " + exact(rs.low_freq_factor) + ", " + exact(rs.high_freq_factor) +
                           ", " + std::to_string(rs.original_max_position_embeddings)},
      {"rope_local_theta", exact(c.rope_local_theta)},
      {"tie_word_embeddings", b(c.tie_word_embeddings)},
      {"biases (qkv, o, mlp)", b(c.qkv_bias) + ", " + b(c.o_bias) + ", " + b(c.mlp_bias)},
      {"qk_norm", std::string(c.qk_norm ? (c.qk_norm_whole ? "whole projection" : "per head") : "none")},
      {"attention windows", list(c.layer_window)},
      {"norm", std::string(c.norm == ModelConfig::Norm::rms ? "rms" : "layer") + ", offset " +
                   exact(c.norm_weight_offset) + (c.post_norms ? ", post norms" : "")},
      {"mlp", std::string(c.mlp == ModelConfig::Mlp::swiglu ? "swiglu" : "gelu") + (c.geglu ? ", geglu" : "")},
      {"positions", std::string(c.positions == ModelConfig::Positions::rope ? "rope" : "learned")},
      {"scale_embeddings", b(c.scale_embeddings)},
      {"attention_scale", exact(c.attention_scale)},
  };
  if (c.moe()) {
    out.push_back({"experts", n(c.num_experts) + " of width " + n(c.moe_intermediate_size) + ", " +
                                  n(c.num_experts_per_tok) + " a token" + (c.norm_topk_prob ? ", renormalised" : "")});
    out.push_back({"sparse layers", "every " + n(c.decoder_sparse_step) + ", dense " + list(c.mlp_only_layers)});
    out.push_back({"routing losses", b(c.output_router_logits) + ", aux " + exact(c.router_aux_loss_coef) +
                                         ", z " + exact(c.router_z_loss_coef)});
  }
  // The tokenizer: what each id means, not only how many there are (two ids swapped change it).
  out.push_back({"tokenizer", std::string(tok.kind()) + ", " + n(tok.vocab_size()) + " tokens"});
  std::string specials = "bos " + std::to_string(tok.bos_id()) + ", eos " + std::to_string(tok.eos_id());
  for (const Tokenizer::Special& s : tok.special_tokens()) specials += ", " + clipped(s.text, 40) + "=" + n(s.id);
  out.push_back({"tokenizer specials", clipped(specials, 200)});
  uint32_t vocabulary = 0;
  for (int32_t id = 0; id < int32_t(tok.vocab_size()); ++id) {
    std::string text;
    try {
      text = tok.decode({id});
    } catch (const Error&) {
      text = "\x01(no text)";  // an id the tokenizer has no text for (a gap in its vocabulary)
    }
    const uint32_t len = uint32_t(text.size());
    vocabulary = crc32c_extend(vocabulary, &len, sizeof len);
    vocabulary = crc32c_extend(vocabulary, text.data(), text.size());
  }
  out.push_back({"tokenizer vocabulary (crc32c of every id's text)", crc32c_hex(vocabulary)});
  const std::string& tmpl = tok.chat_template();
  out.push_back({"tokenizer chat_template (crc32c)", crc32c_hex(crc32c(tmpl.data(), tmpl.size()))});
  return out;
}

void require_same_model_identity(const std::vector<std::pair<std::string, std::string>>& recorded,
                                 const std::vector<std::pair<std::string, std::string>>& now,
                                 const std::string& where) {
  const std::map<std::string, std::string> then(recorded.begin(), recorded.end());
  for (const auto& [name, value] : now) {
    const auto it = then.find(name);
    const std::string before = it == then.end() ? "(not recorded)" : it->second;
    if (before == value) continue;
    fail(where + ": the checkpoint's model has " + name + " " + clipped(before, 120) + ", this run's " +
         clipped(value, 120) +
         " (its model.path config.json, weights' directory or tokenizer changed since): a resume continues "
         "the same model; restore those files, or start a new run from the checkpoint's exported model");
  }
}

}  // namespace mt
