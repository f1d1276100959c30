#include "io/hf_gemma3.h"

#include <cmath>

#include "core/clipped.h"
#include "core/error.h"
#include "io/hf_json_keys.h"
#include "model/presets.h"

namespace mt {

namespace {

// transformers' Gemma3TextConfig defaults for the keys a config may leave out.
constexpr int64_t kGemma3HeadDim = 256;
constexpr double kGemma3QueryPreAttnScalar = 256.0;
constexpr float kGemma3RopeTheta = 1000000.0f;
constexpr float kGemma3RopeLocalBase = 10000.0f;
constexpr int64_t kGemma3SlidingWindow = 4096;
constexpr int64_t kGemma3SlidingWindowPattern = 6;
constexpr const char* kGemma3Activation = "gelu_pytorch_tanh";

// Each layer's window: layer_types when given, else every `sliding_window_pattern`-th layer (1-based)
// global and the others sliding (Gemma3TextConfig's rule).
std::vector<int64_t> gemma3_windows(const nlohmann::json& j, int64_t layers, const std::string& src) {
  int64_t window = kGemma3SlidingWindow;
  if (j.contains("sliding_window") && j["sliding_window"].is_null())
    fail(src + ": sliding_window null is not supported for gemma3_text (its sliding layers need a window)");
  hf_json::read_key(j, "sliding_window", window, src, false);
  if (window <= 0) fail(src + ": sliding_window must be > 0, got " + std::to_string(window));
  const std::vector<bool> sliding = hf_json::read_layer_types(j, layers, src);
  std::vector<int64_t> w(size_t(layers), 0);
  if (!sliding.empty()) {
    for (size_t l = 0; l < sliding.size(); ++l) w[l] = sliding[l] ? window : 0;
    return w;
  }
  int64_t pattern = kGemma3SlidingWindowPattern;
  hf_json::read_key(j, "sliding_window_pattern", pattern, src, false);
  if (pattern <= 0) fail(src + ": sliding_window_pattern must be > 0, got " + std::to_string(pattern));
  for (int64_t l = 0; l < layers; ++l) w[size_t(l)] = (l + 1) % pattern != 0 ? window : 0;
  return w;
}

}  // namespace

void refuse_gemma3_unimplemented(const nlohmann::json& j, const std::string& src) {
  for (const char* key : {"final_logit_softcapping", "attn_logit_softcapping"})
    if (j.contains(key) && !j[key].is_null())
      fail(src + ": " + key + " " + clipped(j[key].dump()) +
           " is not supported (meshtrain computes no logit soft-capping; Gemma 3 ships it null)");
  if (hf_json::set_true(j, "use_bidirectional_attention"))
    fail(src + ": use_bidirectional_attention " + clipped(j["use_bidirectional_attention"].dump()) +
         " is not supported (meshtrain's attention is causal)");
  for (const char* key : {"hidden_activation", "hidden_act"}) {
    auto it = j.find(key);
    if (it != j.end() && !it->is_null() && *it != kGemma3Activation)
      fail(src + ": " + key + " " + clipped(it->dump()) + " is not supported for gemma3_text (its MLP is GeGLU: " +
           kGemma3Activation + ")");
  }
}

void read_gemma3_config(const nlohmann::json& j, ModelConfig& c, const std::string& src) {
  give_gemma3_parts(c);
  if (!j.contains("rope_theta") || j["rope_theta"].is_null()) c.rope_theta = kGemma3RopeTheta;
  c.tie_word_embeddings = true;
  hf_json::read_key(j, "tie_word_embeddings", c.tie_word_embeddings, src, false);
  hf_json::read_key(j, "attention_bias", c.qkv_bias, src, false);
  c.o_bias = c.qkv_bias;
  if (c.head_dim_override <= 0) c.head_dim_override = kGemma3HeadDim;
  double scalar = kGemma3QueryPreAttnScalar;
  hf_json::read_key(j, "query_pre_attn_scalar", scalar, src, false);
  if (!(scalar > 0.0)) fail(src + ": query_pre_attn_scalar must be > 0, got " + clipped(j["query_pre_attn_scalar"].dump()));
  c.attention_scale = float(1.0 / std::sqrt(scalar));  // transformers: query_pre_attn_scalar ** -0.5
  if (!(c.attention_scale > 0.0f) || !std::isfinite(c.attention_scale))
    fail(src + ": query_pre_attn_scalar " + clipped(j["query_pre_attn_scalar"].dump()) +
         " gives an attention scale outside float's range");
  c.rope_local_theta = kGemma3RopeLocalBase;
  hf_json::read_key(j, "rope_local_base_freq", c.rope_local_theta, src, false);
  if (!(c.rope_local_theta > 0.0f)) fail(src + ": rope_local_base_freq must be > 0");
  if (c.num_hidden_layers > 0 && c.num_hidden_layers <= (int64_t(1) << 20))
    c.layer_window = gemma3_windows(j, c.num_hidden_layers, src);
}

void write_gemma3_keys(nlohmann::ordered_json& j, const ModelConfig& c) {
  j["head_dim"] = c.head_dim();
  // The scalar whose ^-1/2 is the scale: an integer in every released config (256, 168), written
  // as one when it reads back as the same scale; else the double (which does).
  const double scalar = 1.0 / (double(c.attention_scale) * double(c.attention_scale));
  const double whole = std::round(scalar);
  const bool exact = whole >= 1.0 && whole < 1e15 && float(1.0 / std::sqrt(whole)) == c.attention_scale;
  j["query_pre_attn_scalar"] = exact ? nlohmann::ordered_json(int64_t(whole)) : nlohmann::ordered_json(scalar);
  j["attention_bias"] = c.qkv_bias;
  j["hidden_activation"] = kGemma3Activation;
  // A source's hidden_act other than Gemma's (a LLaMA directory the model was made from) would be
  // refused on reading back: Gemma 3 reads hidden_activation only.
  if (j.contains("hidden_act") && j["hidden_act"] != kGemma3Activation) j.erase("hidden_act");
  j["rope_local_base_freq"] = double(c.rope_local_theta);
  if (c.rope_scaling.factor > 0.0f)
    j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", double(c.rope_scaling.factor)}};
  int64_t window = 0;
  nlohmann::ordered_json types = nlohmann::ordered_json::array();
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    if (c.attention_window(l) > 0) window = c.attention_window(l);
    types.push_back(c.attention_window(l) > 0 ? "sliding_attention" : "full_attention");
  }
  if (window > 0) j["sliding_window"] = window;
  j["layer_types"] = types;
  for (const char* key : {"final_logit_softcapping", "attn_logit_softcapping"}) j[key] = nullptr;
}

std::string gemma3_multimodal_refusal(const std::string& src) {
  return src + ": model_type 'gemma3' is the multimodal Gemma3ForConditionalGeneration, which is not supported "
               "(give a text-only Gemma 3: model_type gemma3_text, Gemma3ForCausalLM)";
}

}  // namespace mt
