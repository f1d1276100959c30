#include "io/hf_config.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/bounded_json.h"
#include "core/clipped.h"
#include "core/error.h"
#include "io/gpt2_config.h"
#include "io/hf_gemma3.h"
#include "io/hf_json_keys.h"
#include "io/hf_moe.h"

namespace mt {

namespace {

using json = nlohmann::json;

using hf_json::read_key;
using hf_json::short_decimal;
using hf_json::set_true;

// The families meshtrain computes: HF model_type, the architectures entry of its causal LM, and
// what its block has (model/config.h). Their tensor names are LLaMA's, plus the biases and q/k
// norms the config gives them (model/param_shapes.cpp): one table serves all four.
struct Family {
  const char* model_type;
  const char* architecture;
};
constexpr Family kFamilies[] = {{"llama", "LlamaForCausalLM"},
                                {"mistral", "MistralForCausalLM"},
                                {"qwen2", "Qwen2ForCausalLM"},
                                {"qwen3", "Qwen3ForCausalLM"},
                                {"gpt2", "GPT2LMHeadModel"},
                                {"mixtral", "MixtralForCausalLM"},
                                {"qwen3_moe", "Qwen3MoeForCausalLM"},
                                {"olmoe", "OlmoeForCausalLM"},
                                {kGemma3ModelType, "Gemma3ForCausalLM"}};

std::string family_list() {
  std::string s;
  for (const Family& f : kFamilies) s += (s.empty() ? "" : ", ") + std::string(f.model_type);
  return s;
}

// model_type, or (without one) the family whose causal LM architectures[0] names.
std::string family_of(const json& j, const std::string& src) {
  if (j.contains("model_type") && !j["model_type"].is_null()) {
    if (!j["model_type"].is_string()) fail(src + ": key 'model_type' must be a string");
    const std::string t = j["model_type"].get<std::string>();
    for (const Family& f : kFamilies)
      if (t == f.model_type) return t;
    if (t == "gemma3") fail(gemma3_multimodal_refusal(src));
    if (const std::string why = unsupported_moe_reason(t, src); !why.empty()) fail(why);
    fail(src + ": model_type '" + clipped(t) + "' is not supported (" + family_list() + ")");
  }
  auto arch = j.find("architectures");
  if (arch != j.end() && arch->is_array() && !arch->empty() && (*arch)[0].is_string()) {
    const std::string a = (*arch)[0].get<std::string>();
    for (const Family& f : kFamilies)
      if (a == f.architecture) return f.model_type;
    fail(src + ": architectures '" + clipped(a) + "' is not supported (" + family_list() + ")");
  }
  return "llama";
}

// Keys that change the math in a way meshtrain does not compute: loading one would drop what it
// claims (bias tensors not read, a quantised weight not dequantised), and writing it back would
// claim behaviour the weights were not trained with. Refused rather than ignored.
void refuse_unimplemented(const json& j, const std::string& family, const std::string& src) {
  // Which bias keys a family reads (below); on the others a bias claim is refused.
  const bool reads_attention_bias =
      family == "qwen3" || family == "qwen3_moe" || family == "olmoe" || family == kGemma3ModelType;
  for (const char* key : {"attention_bias", "mlp_bias"}) {
    if (key == std::string("attention_bias") && reads_attention_bias) continue;
    if (set_true(j, key))
      fail(src + ": " + key + " " + clipped(j[key].dump()) + " is not supported for " + family +
           " (meshtrain gives " + family + " the biases of its HF modeling code only)");
  }
  if (family == kGemma3ModelType) refuse_gemma3_unimplemented(j, src);
  auto act = j.find("hidden_act");
  if (family != kGemma3ModelType && act != j.end() && !act->is_null() && *act != "silu")
    fail(src + ": hidden_act " + clipped(act->dump()) + " is not supported (meshtrain's MLP is SwiGLU: silu)");
  if (j.contains("quantization_config"))
    fail(src + ": quantization_config: quantised weights are not supported (give the unquantised model)");
  auto dropout = j.find("attention_dropout");
  if (dropout != j.end() && dropout->is_number() && dropout->get<double>() != 0.0)
    fail(src + ": attention_dropout " + clipped(dropout->dump()) + " is not supported (meshtrain's attention has no dropout)");
  if (j.contains("rope_parameters") && !j["rope_parameters"].is_null())
    fail(src + ": rope_parameters is not supported (give rope_theta and rope_scaling, as transformers 4.x writes them)");
  if (j.contains("layer_types") && family != "qwen2" && family != "qwen3" && family != "qwen3_moe" &&
      family != kGemma3ModelType)
    fail(src + ": layer_types is not supported for " + family);
}

// The layers' attention windows (ModelConfig::layer_window). Mistral: sliding_window (null:
// none) on every layer. Qwen2 / Qwen3 (transformers' rule): with use_sliding_window, the layers
// that layer_types marks "sliding_attention", or without layer_types those from max_window_layers
// on, get sliding_window.
std::vector<int64_t> layer_windows(const json& j, const std::string& family, int64_t layers,
                                   const std::string& src) {
  if (family == "llama" || family == "olmoe") {
    if (set_true(j, "sliding_window"))
      fail(src + ": sliding_window is not a llama key (a sliding window is mistral's or qwen2's)");
    return {};
  }
  int64_t window = 0;
  read_key(j, "sliding_window", window, src, false);
  if (j.contains("sliding_window") && !j["sliding_window"].is_null() && window <= 0)
    fail(src + ": sliding_window must be > 0 or null, got " + std::to_string(window));
  if (family == "mistral" || family == "mixtral")
    return window > 0 ? std::vector<int64_t>(size_t(layers), window) : std::vector<int64_t>{};
  bool use = false;
  read_key(j, "use_sliding_window", use, src, false);
  const std::vector<bool> sliding = hf_json::read_layer_types(j, layers, src);
  const bool marks_sliding = std::find(sliding.begin(), sliding.end(), true) != sliding.end();
  // transformers gives such layers no window (sliding_window becomes None): the two keys disagree.
  if (marks_sliding && !(use && window > 0))
    fail(src + ": layer_types marks sliding_attention layers, but " +
         (use ? "sliding_window is null" : "use_sliding_window is false") +
         " (transformers would give them full attention; mark them full_attention or turn the window on)");
  if (!use || window <= 0) return {};
  std::vector<int64_t> w(size_t(layers), 0);
  if (!sliding.empty()) {
    for (size_t l = 0; l < sliding.size(); ++l) w[l] = sliding[l] ? window : 0;
    return w;
  }
  int64_t from = 28;  // transformers' default max_window_layers
  read_key(j, "max_window_layers", from, src, false);
  if (from < 0) fail(src + ": max_window_layers must be >= 0, got " + std::to_string(from));
  for (int64_t l = from; l < layers; ++l) w[size_t(l)] = window;
  return w;
}

}  // namespace

ModelConfig parse_hf_config(const std::string& text, const std::string& src) {
  json j = parse_json(text, JsonKind::hf_config, src);
  if (!j.is_object()) fail(src + ": expected a JSON object");
  const std::string family = family_of(j, src);
  refuse_unimplemented(j, family, src);
  if (family == "gpt2") return parse_gpt2_config(j, src);  // its own keys (io/gpt2_config.h)
  ModelConfig c;
  c.model_type = family;
  read_key(j, "hidden_size", c.hidden_size, src, true);
  read_key(j, "intermediate_size", c.intermediate_size, src, true);
  read_key(j, "num_hidden_layers", c.num_hidden_layers, src, true);
  read_key(j, "num_attention_heads", c.num_attention_heads, src, true);
  c.num_key_value_heads = c.num_attention_heads;  // HF's default when absent (no GQA)
  read_key(j, "num_key_value_heads", c.num_key_value_heads, src, false);
  read_key(j, "vocab_size", c.vocab_size, src, true);
  read_key(j, "max_position_embeddings", c.max_position_embeddings, src, true);
  c.rms_norm_eps = 1e-6f;  // HF ModelConfig defaults
  c.rope_theta = 10000.0f;
  read_key(j, "rms_norm_eps", c.rms_norm_eps, src, false);
  read_key(j, "rope_theta", c.rope_theta, src, false);
  read_key(j, "tie_word_embeddings", c.tie_word_embeddings, src, false);
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {
    const json& rs = j["rope_scaling"];
    if (!rs.is_object()) fail(src + ": rope_scaling must be an object or null");
    // transformers reads rope_type and falls back to the older type: two that differ contradict.
    if (rs.contains("rope_type") && rs.contains("type") && rs["rope_type"] != rs["type"])
      fail(src + ": rope_scaling rope_type " + clipped(rs["rope_type"].dump()) + " contradicts its type " +
           clipped(rs["type"].dump()) + " (two names for one setting; give one, or both alike)");
    const char* type_key = rs.contains("rope_type") ? "rope_type" : "type";
    if (rs.contains(type_key) && !rs[type_key].is_string())
      fail(src + ": rope_scaling " + type_key + " must be a string");
    const std::string type = rs.value(type_key, std::string());
    const bool gemma3 = family == kGemma3ModelType;  // Gemma 3's global layers: linear
    if (gemma3 ? type != "linear" && type != "default" : type != "llama3" && type != "default")
      fail(src + ": rope_scaling type '" + type + "' is not supported (" +
           (gemma3 ? "linear" : "llama3") + " or default only)");
    if (type == "linear") {
      read_key(rs, "factor", c.rope_scaling.factor, src + " rope_scaling", true);
      if (!(c.rope_scaling.factor > 0.0f)) fail(src + ": rope_scaling factor must be > 0");
      c.rope_scaling.linear = true;
    }
    if (type == "llama3") {
      const std::string where = src + " rope_scaling";
      read_key(rs, "factor", c.rope_scaling.factor, where, true);
      read_key(rs, "low_freq_factor", c.rope_scaling.low_freq_factor, where, true);
      read_key(rs, "high_freq_factor", c.rope_scaling.high_freq_factor, where, true);
      read_key(rs, "original_max_position_embeddings",
               c.rope_scaling.original_max_position_embeddings, where, true);
    }
  }
  // The family's block (transformers' modeling code): Qwen2 has q/k/v biases, never one on o;
  // Qwen3 per-head q/k norms and attention_bias on all four; Mistral a sliding window.
  if (family == "qwen2") c.qkv_bias = true;
  if (family == "qwen3" || family == "qwen3_moe" || family == "olmoe") {
    c.qk_norm = true;
    read_key(j, "attention_bias", c.qkv_bias, src, false);
    c.o_bias = c.qkv_bias;
  }
  // An explicit head_dim (Qwen3, Mistral Nemo) need not be hidden_size / num_attention_heads.
  // LLaMA's is checked to be (below): meshtrain's llama reads none.
  const bool explicit_head_dim = family != "llama" && j.contains("head_dim") && !j["head_dim"].is_null();
  if (explicit_head_dim) {
    read_key(j, "head_dim", c.head_dim_override, src, false);
    if (c.head_dim_override <= 0 || c.head_dim_override > c.hidden_size * 16)
      fail(src + ": head_dim must be in [1, 16 * hidden_size], got " + std::to_string(c.head_dim_override));
  }
  if (is_moe_model_type(family)) read_moe_config(j, c, src);
  if (family == kGemma3ModelType) read_gemma3_config(j, c, src);
  else if (c.num_hidden_layers > 0 && c.num_hidden_layers <= (int64_t(1) << 20))
    c.layer_window = layer_windows(j, family, c.num_hidden_layers, src);
  try {
    c.validate();
  } catch (const Error& e) {
    fail(src + ": " + e.what());
  }
  // Compared after validate(), which has made sure the division is exact (a product could overflow).
  if (!explicit_head_dim && j.contains("head_dim") && j["head_dim"].is_number_integer() &&
      j["head_dim"] != c.hidden_size / c.num_attention_heads)
    fail(src + ": head_dim * num_attention_heads != hidden_size is not supported for " + family);
  return c;
}

ModelConfig load_hf_config(const std::string& path) {
  return parse_hf_config(read_json_text(path, JsonKind::hf_config), path);
}

namespace {


// The keys by which the family's block differs from LLaMA's, as its HF config names them: what
// parse_hf_config read, so that the written directory loads as the same model.
void write_family_keys(nlohmann::ordered_json& j, const ModelConfig& c) {
  if (c.head_dim_override > 0 && c.head_dim() * c.num_attention_heads != c.hidden_size)
    j["head_dim"] = c.head_dim();
  if (c.model_type == "qwen3" || c.model_type == "qwen3_moe" || c.model_type == "olmoe") j["attention_bias"] = c.qkv_bias;
  if (is_moe_model_type(c.model_type)) write_moe_keys(j, c);
  if (c.model_type == kGemma3ModelType) write_gemma3_keys(j, c);
  const int64_t L = c.num_hidden_layers;
  int64_t window = 0, first = L;
  for (int64_t l = L - 1; l >= 0; --l)
    if (c.attention_window(l) > 0) window = c.attention_window(l), first = l;
  if (c.model_type == "mistral" || c.model_type == "mixtral") {
    j["sliding_window"] = window > 0 ? nlohmann::ordered_json(window) : nlohmann::ordered_json(nullptr);
  } else if (c.model_type == "qwen2" || c.model_type == "qwen3" || c.model_type == "qwen3_moe") {
    j["use_sliding_window"] = window > 0;
    if (window > 0) j["sliding_window"] = window, j["max_window_layers"] = first;
    if (j.contains("layer_types") || window > 0) {
      nlohmann::ordered_json types = nlohmann::ordered_json::array();
      for (int64_t l = 0; l < L; ++l)
        types.push_back(c.attention_window(l) > 0 ? "sliding_attention" : "full_attention");
      j["layer_types"] = types;
    }
  }
}

}  // namespace

namespace {

// The keys every family's config.json ends with: the weights' dtype and the special token ids.
std::string finish_hf_config(nlohmann::ordered_json& j, const std::string& torch_dtype,
                             const SpecialTokenIds& tokens) {
  j["torch_dtype"] = torch_dtype;
  // transformers 4.56 and later write "dtype" for the same thing; a kept one must not disagree.
  if (j.contains("dtype")) j["dtype"] = torch_dtype;
  // Absent ids would be read as ModelConfig's defaults (1 and 2), wrong for most tokenizers; null
  // says "none".
  if (tokens.known) {
    auto id = [](int32_t v) { return v >= 0 ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr); };
    if (!j.contains("bos_token_id")) j["bos_token_id"] = id(tokens.bos);
    if (!j.contains("eos_token_id")) j["eos_token_id"] = id(tokens.eos);
  }
  return j.dump(2) + "\n";
}

}  // namespace

std::string hf_config_json(const ModelConfig& c, const std::string& torch_dtype,
                           const std::string& source_json, const SpecialTokenIds& tokens) {
  // The source's keys first, in its order; the keys below replace theirs in place.
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  if (!source_json.empty()) {
    j = parse_ordered_json(source_json, JsonKind::hf_config, "the source model's config.json");
    if (!j.is_object()) fail("the source model's config.json is not a JSON object");
  }
  const char* architecture = "LlamaForCausalLM";
  for (const Family& f : kFamilies)
    if (c.model_type == f.model_type) architecture = f.architecture;
  if (!j.contains("architectures")) j["architectures"] = {architecture};
  j["model_type"] = c.model_type;
  if (c.model_type == "gpt2") {
    write_gpt2_config_keys(j, c);
    return finish_hf_config(j, torch_dtype, tokens);
  }
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
  if (c.model_type != kGemma3ModelType) j["hidden_act"] = "silu";  // Gemma's: hidden_activation
  write_family_keys(j, c);
  return finish_hf_config(j, torch_dtype, tokens);
}

}  // namespace mt
