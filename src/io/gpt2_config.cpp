#include "io/gpt2_config.h"

#include <cmath>
#include <utility>

#include "core/clipped.h"
#include "core/error.h"
#include "io/hf_json_keys.h"

namespace mt {

namespace {

using json = nlohmann::json;

// An integer key, GPT2Config's default when absent or null.
int64_t gpt2_int(const json& j, const char* key, int64_t fallback, const std::string& src) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number_integer()) fail(src + ": key '" + key + "' must be an integer, got " + clipped(it->dump()));
  return it->get<int64_t>();
}

bool gpt2_flag(const json& j, const char* key, bool fallback, const std::string& src) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) fail(src + ": key '" + key + "' must be a boolean, got " + clipped(it->dump()));
  return it->get<bool>();
}

// GPT2Config's attribute_map: transformers takes hidden_size for n_embd, num_hidden_layers for
// n_layer, num_attention_heads for n_head and max_position_embeddings for n_positions, the HF name
// winning when both are given. Either name is read; both, disagreeing, are refused naming each
// (one of them is a mistake, and meshtrain read n_embd while transformers reads hidden_size).
constexpr std::pair<const char*, const char*> kGpt2Aliases[] = {{"n_embd", "hidden_size"},
                                                                {"n_layer", "num_hidden_layers"},
                                                                {"n_head", "num_attention_heads"},
                                                                {"n_positions", "max_position_embeddings"}};

bool given(const json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

int64_t gpt2_aliased_int(const json& j, const char* own, const char* hf, int64_t fallback, const std::string& src) {
  const int64_t v = gpt2_int(j, own, fallback, src);
  const int64_t a = gpt2_int(j, hf, v, src);
  if (given(j, own) && a != v)
    fail(src + ": " + hf + " " + std::to_string(a) + " contradicts " + own + " " + std::to_string(v) +
         " (one gpt2 setting under two names; give one, or both alike)");
  return a;
}

}  // namespace

ModelConfig parse_gpt2_config(const json& j, const std::string& src) {
  // transformers' GPT2Config defaults (GPT-2 small) where a key is absent.
  ModelConfig c;
  c.model_type = "gpt2";
  c.hidden_size = gpt2_aliased_int(j, "n_embd", "hidden_size", 768, src);
  c.num_hidden_layers = gpt2_aliased_int(j, "n_layer", "num_hidden_layers", 12, src);
  c.num_attention_heads = gpt2_aliased_int(j, "n_head", "num_attention_heads", 12, src);
  c.vocab_size = gpt2_int(j, "vocab_size", 50257, src);
  c.max_position_embeddings = gpt2_aliased_int(j, "n_positions", "max_position_embeddings", 1024, src);
  // n_inner null: 4 * n_embd (modeling_gpt2.py's GPT2Block).
  c.intermediate_size = gpt2_int(j, "n_inner", 4 * c.hidden_size, src);
  // GPT-2 has no intermediate_size (transformers keeps it unused): one that is not the MLP's width
  // says the config means another model.
  if (const int64_t other = gpt2_int(j, "intermediate_size", c.intermediate_size, src); other != c.intermediate_size)
    fail(src + ": intermediate_size " + std::to_string(other) + " contradicts n_inner " +
         (given(j, "n_inner") ? "" : "(4 x n_embd) ") + std::to_string(c.intermediate_size) +
         " (gpt2's MLP width is n_inner; transformers ignores intermediate_size)");
  const int64_t n_ctx = gpt2_int(j, "n_ctx", c.max_position_embeddings, src);
  if (n_ctx != c.max_position_embeddings)
    fail(src + ": n_ctx " + std::to_string(n_ctx) + " differs from n_positions " +
         std::to_string(c.max_position_embeddings) + " (GPT-2's context is n_positions; give both alike)");
  c.rms_norm_eps = 1e-5f;
  if (auto it = j.find("layer_norm_epsilon"); it != j.end() && !it->is_null()) {
    if (!it->is_number() || !std::isfinite(it->get<double>()))
      fail(src + ": key 'layer_norm_epsilon' must be a number, got " + clipped(it->dump()));
    c.rms_norm_eps = it->get<float>();
  }
  if (auto it = j.find("activation_function"); it != j.end() && !it->is_null()) {
    if (!it->is_string() || (*it != "gelu_new" && *it != "gelu_pytorch_tanh"))
      fail(src + ": activation_function " + clipped(it->dump()) +
           " is not supported (meshtrain's GPT-2 MLP is GeLU with the tanh approximation: gelu_new or gelu_pytorch_tanh)");
  }
  if (!gpt2_flag(j, "scale_attn_weights", true, src))
    fail(src + ": scale_attn_weights false is not supported (meshtrain scales attention by 1/sqrt(head_dim))");
  for (const char* key : {"scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn", "add_cross_attention"})
    if (gpt2_flag(j, key, false, src)) fail(src + ": " + key + " true is not supported for gpt2");
  if (!gpt2_flag(j, "tie_word_embeddings", true, src))
    fail(src + ": tie_word_embeddings false is not supported for gpt2 (its head is the token embedding)");
  use_gpt2_block(c);
  try {
    c.validate();
  } catch (const Error& e) {
    fail(src + ": " + e.what());
  }
  return c;
}

void write_gpt2_config_keys(nlohmann::ordered_json& j, const ModelConfig& c) {
  j["n_embd"] = c.hidden_size;
  j["n_layer"] = c.num_hidden_layers;
  j["n_head"] = c.num_attention_heads;
  // A kept null stays null when it still means 4 * n_embd.
  const bool inner_default = c.intermediate_size == 4 * c.hidden_size;
  if (!(inner_default && j.contains("n_inner") && j["n_inner"].is_null())) j["n_inner"] = c.intermediate_size;
  j["n_positions"] = c.max_position_embeddings;
  if (j.contains("n_ctx")) j["n_ctx"] = c.max_position_embeddings;
  // A kept HF name (or intermediate_size) must not contradict what is written on reading back.
  for (const auto& [own, hf] : kGpt2Aliases)
    if (j.contains(hf)) j[hf] = j[own];
  if (j.contains("intermediate_size")) j["intermediate_size"] = c.intermediate_size;
  j["vocab_size"] = c.vocab_size;
  j["layer_norm_epsilon"] = hf_json::short_decimal(c.rms_norm_eps);
  if (!j.contains("activation_function") || j["activation_function"].is_null()) j["activation_function"] = "gelu_new";
  j["tie_word_embeddings"] = true;
}

}  // namespace mt
