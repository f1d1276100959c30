#include "io/hf_config.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "core/bounded_json.h"
#include "core/clipped.h"
#include "core/error.h"

namespace mt {

namespace {

using json = nlohmann::json;

template <class V>
void read_key(const json& j, const char* key, V& out, const std::string& src, bool required) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) fail(src + ": missing key '" + key + "'");
    return;
  }
  if constexpr (std::is_same_v<V, bool>) {
    if (!it->is_boolean()) fail(src + ": key '" + key + "' must be a boolean");
  } else if constexpr (std::is_integral_v<V>) {
    if (!it->is_number_integer()) fail(src + ": key '" + key + "' must be an integer");
  } else {
    if (!it->is_number()) fail(src + ": key '" + key + "' must be a number");
    // A double beyond float's range would become infinity (and be written back as null).
    if (!std::isfinite(it->get<V>())) fail(src + ": key '" + key + "' is out of range: " + it->dump());
  }
  out = it->get<V>();
}

// Keys that describe a model meshtrain does not compute: loading one would drop what they claim
// (bias tensors are not read, a quantised weight is not dequantised), and writing them back would
// claim behaviour the weights were not trained with. Refused rather than ignored.
void refuse_unimplemented(const json& j, const std::string& src) {
  for (const char* key : {"attention_bias", "mlp_bias"}) {
    auto it = j.find(key);
    if (it != j.end() && !(it->is_null() || (it->is_boolean() && !it->get<bool>())))
      fail(src + ": " + key + " " + clipped(it->dump()) + " is not supported (meshtrain's linear layers have no biases)");
  }
  auto act = j.find("hidden_act");
  if (act != j.end() && !act->is_null() && *act != "silu")
    fail(src + ": hidden_act " + clipped(act->dump()) + " is not supported (meshtrain's MLP is SwiGLU: silu)");
  if (j.contains("quantization_config"))
    fail(src + ": quantization_config: quantised weights are not supported (give the unquantised model)");
}

}  // namespace

LlamaConfig parse_hf_config(const std::string& text, const std::string& src) {
  json j = parse_json(text, JsonKind::hf_config, src);
  if (!j.is_object()) fail(src + ": expected a JSON object");
  if (j.contains("model_type") && j["model_type"].is_string() && j["model_type"] != "llama")
    fail(src + ": model_type '" + clipped(j["model_type"].get<std::string>()) + "' is not supported (llama only)");
  refuse_unimplemented(j, src);
  LlamaConfig c;
  read_key(j, "hidden_size", c.hidden_size, src, true);
  read_key(j, "intermediate_size", c.intermediate_size, src, true);
  read_key(j, "num_hidden_layers", c.num_hidden_layers, src, true);
  read_key(j, "num_attention_heads", c.num_attention_heads, src, true);
  c.num_key_value_heads = c.num_attention_heads;  // HF's default when absent (no GQA)
  read_key(j, "num_key_value_heads", c.num_key_value_heads, src, false);
  read_key(j, "vocab_size", c.vocab_size, src, true);
  read_key(j, "max_position_embeddings", c.max_position_embeddings, src, true);
  c.rms_norm_eps = 1e-6f;  // HF LlamaConfig defaults
  c.rope_theta = 10000.0f;
  read_key(j, "rms_norm_eps", c.rms_norm_eps, src, false);
  read_key(j, "rope_theta", c.rope_theta, src, false);
  read_key(j, "tie_word_embeddings", c.tie_word_embeddings, src, false);
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {
    const json& rs = j["rope_scaling"];
    if (!rs.is_object()) fail(src + ": rope_scaling must be an object or null");
    const char* type_key = rs.contains("rope_type") ? "rope_type" : "type";
    if (rs.contains(type_key) && !rs[type_key].is_string())
      fail(src + ": rope_scaling " + type_key + " must be a string");
    const std::string type = rs.value(type_key, std::string());
    if (type != "llama3") fail(src + ": rope_scaling type '" + type + "' is not supported (llama3 only)");
    const std::string where = src + " rope_scaling";
    read_key(rs, "factor", c.rope_scaling.factor, where, true);
    read_key(rs, "low_freq_factor", c.rope_scaling.low_freq_factor, where, true);
    read_key(rs, "high_freq_factor", c.rope_scaling.high_freq_factor, where, true);
    read_key(rs, "original_max_position_embeddings",
             c.rope_scaling.original_max_position_embeddings, where, true);
  }
  try {
    c.validate();
  } catch (const Error& e) {
    fail(src + ": " + e.what());
  }
  // Compared after validate(), which has made sure the division is exact (a product could overflow).
  if (j.contains("head_dim") && j["head_dim"].is_number_integer() &&
      j["head_dim"] != c.hidden_size / c.num_attention_heads)
    fail(src + ": head_dim * num_attention_heads != hidden_size is not supported");
  return c;
}

LlamaConfig load_hf_config(const std::string& path) {
  return parse_hf_config(read_json_text(path, JsonKind::hf_config), path);
}

namespace {

// The double whose shortest decimal is the float's shortest decimal, so that JSON shows what a
// user wrote (1e-05) rather than every digit of the float widened to double.
double short_decimal(float v) {
  char buf[32];
  const auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::strtod(std::string(buf, res.ptr).c_str(), nullptr);
}

}  // namespace

std::string hf_config_json(const LlamaConfig& c, const std::string& torch_dtype,
                           const std::string& source_json, const SpecialTokenIds& tokens) {
  // The source's keys first, in its order; the keys below replace theirs in place.
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  if (!source_json.empty()) {
    j = parse_ordered_json(source_json, JsonKind::hf_config, "the source model's config.json");
    if (!j.is_object()) fail("the source model's config.json is not a JSON object");
  }
  if (!j.contains("architectures")) j["architectures"] = {"LlamaForCausalLM"};
  j["model_type"] = "llama";
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["vocab_size"] = c.vocab_size;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = short_decimal(c.rms_norm_eps);
  j["rope_theta"] = short_decimal(c.rope_theta);
  if (c.rope_scaling.factor > 0.0f)
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", short_decimal(c.rope_scaling.factor)},
                         {"low_freq_factor", short_decimal(c.rope_scaling.low_freq_factor)},
                         {"high_freq_factor", short_decimal(c.rope_scaling.high_freq_factor)},
                         {"original_max_position_embeddings",
                          c.rope_scaling.original_max_position_embeddings}};
  else
    j["rope_scaling"] = nullptr;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["hidden_act"] = "silu";
  j["torch_dtype"] = torch_dtype;
  // transformers 4.56 and later write "dtype" for the same thing; a kept one must not disagree.
  if (j.contains("dtype")) j["dtype"] = torch_dtype;
  // Absent ids would be read as LlamaConfig's defaults (1 and 2), wrong for most tokenizers; null
  // says "none".
  if (tokens.known) {
    auto id = [](int32_t v) { return v >= 0 ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr); };
    if (!j.contains("bos_token_id")) j["bos_token_id"] = id(tokens.bos);
    if (!j.contains("eos_token_id")) j["eos_token_id"] = id(tokens.eos);
  }
  return j.dump(2) + "\n";
}

}  // namespace mt
