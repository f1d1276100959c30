#include "io/gguf_architectures.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "model/param_shapes.h"
#include "model/presets.h"
#include "model/transformer.h"

namespace mt {

namespace {

// Names read from llama.cpp's gguf-py/gguf/constants.py (MODEL_TENSOR names), its converter's
// tensor map and its model loaders (src/models/*.cpp) of the release node-llama-cpp 3.22.1 bundles.
// The head is absent with tied embeddings: llama.cpp's graphs then read token_embd.
const std::vector<GgufTensorName> kOutsideLayers = {
    {kEmbedName, "token_embd.weight"},
    {kFinalNormName, "output_norm.weight"},
    {kHeadName, "output.weight"},
};

std::vector<GgufTensorName> gguf_names_joined(std::vector<GgufTensorName> names, const std::vector<GgufTensorName>& more) {
  names.insert(names.end(), more.begin(), more.end());
  return names;
}

const std::vector<GgufTensorName> kLlamaLayer = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
};

const std::vector<GgufTensorName> kQkNorms = {
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
};

// GPT-2 (llama.cpp's src/models/gpt2.cpp): LayerNorms with biases, q, k and v fused into one
// attn_qkv (its rows q, then k, then v, as HF's c_attn), biases on every projection, no gate.
const std::vector<GgufTensorName> kGpt2Outside = {
    {kEmbedName, "token_embd.weight"},
    {kPositionEmbedName, "position_embd.weight"},
    {kFinalNormName, "output_norm.weight"},
    {"model.norm.bias", "output_norm.bias"},
    {kHeadName, "output.weight"},
};
const std::vector<GgufTensorName> kGpt2Layer = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"input_layernorm.bias", "attn_norm.bias"},
    {"self_attn.q_proj.weight", "attn_qkv.weight"},
    {"self_attn.k_proj.weight", "attn_qkv.weight"},
    {"self_attn.v_proj.weight", "attn_qkv.weight"},
    {"self_attn.q_proj.bias", "attn_qkv.bias"},
    {"self_attn.k_proj.bias", "attn_qkv.bias"},
    {"self_attn.v_proj.bias", "attn_qkv.bias"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.o_proj.bias", "attn_output.bias"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"post_attention_layernorm.bias", "ffn_norm.bias"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.up_proj.bias", "ffn_up.bias"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
    {"mlp.down_proj.bias", "ffn_down.bias"},
};

// Gemma 3 (llama.cpp's src/models/gemma3.cpp): HF's post_attention_layernorm is llama.cpp's
// post_attention_norm (LLM_TENSOR_ATTN_POST_NORM), pre_feedforward_layernorm its ffn_norm and
// post_feedforward_layernorm its post_ffw_norm (the strings of src/llama-arch.cpp).
const std::vector<GgufTensorName> kGemma3Layer = gguf_names_joined(
    {
        {"input_layernorm.weight", "attn_norm.weight"},
        {"self_attn.q_proj.weight", "attn_q.weight"},
        {"self_attn.k_proj.weight", "attn_k.weight"},
        {"self_attn.v_proj.weight", "attn_v.weight"},
        {"self_attn.o_proj.weight", "attn_output.weight"},
        {"post_attention_layernorm.weight", "post_attention_norm.weight"},
        {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
        {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
        {"mlp.gate_proj.weight", "ffn_gate.weight"},
        {"mlp.up_proj.weight", "ffn_up.weight"},
        {"mlp.down_proj.weight", "ffn_down.weight"},
    },
    kQkNorms);

const std::vector<GgufHparam> kDecoderHparams = {
    GgufHparam::context_length, GgufHparam::embedding_length, GgufHparam::block_count,
    GgufHparam::feed_forward_length, GgufHparam::rope_dimension_count, GgufHparam::head_count,
    GgufHparam::head_count_kv, GgufHparam::rms_norm_eps, GgufHparam::rope_freq_base,
    GgufHparam::vocab_size, GgufHparam::head_length,
};

// The keys llama.cpp's converter writes for GPT2LMHeadModel (no RoPE, LayerNorm's epsilon).
const std::vector<GgufHparam> kGpt2Hparams = {
    GgufHparam::context_length, GgufHparam::embedding_length, GgufHparam::block_count,
    GgufHparam::feed_forward_length, GgufHparam::head_count, GgufHparam::head_count_kv,
    GgufHparam::layer_norm_eps, GgufHparam::vocab_size,
};

// Gemma 3: the decoder's keys and its windows, their RoPE base and the global layers' scaling.
std::vector<GgufHparam> gemma3_gguf_hparams() {
  std::vector<GgufHparam> h = kDecoderHparams;
  for (GgufHparam x : {GgufHparam::rope_freq_base_swa, GgufHparam::rope_scaling_linear, GgufHparam::sliding_window})
    h.push_back(x);
  return h;
}

// The table. Notes per entry:
// - llama: LLaMA, and Mistral as llama.cpp's converter writes it (MistralForCausalLM is its
//   Transformer). llama.cpp's llama graph also takes optional biases, but older llama.cpp ignores
//   them, so a biased model is not written as llama.
// - qwen2: biases on q, k and v (llama.cpp's qwen2 has no o bias and sizes q and o [hidden,
//   hidden]); RoPE on halves as HF's, so no permutation (its converter has none).
// - qwen3: RMSNorm over each head of q and k; head_dim free (key_length / value_length).
//   llama.cpp's qwen3 loads no o bias, so attention_bias is refused: the biases have no names.
// - gpt2: learned positions (position_embd, context_length rows), fused attn_qkv; o is [hidden,
//   hidden] there. The tied head is not written: llama.cpp's gpt2 then reads token_embd.
// - gemma3: four norms a layer and q/k norms, stored as 1 + w (gguf_value_shift); llama.cpp scales
//   the embeddings by sqrtf(hidden) itself, and reads the windowed layers, their width and their
//   RoPE base from keys, with linear rope scaling on the global layers only, as meshtrain.
std::vector<GgufArchitecture> make_gguf_architectures() {
  return {
      {.name = "llama", .model_type = "llama", .written_for = {"llama", "mistral"}, .interleaved_rope = true,
       .rope_freqs = true, .hparams = kDecoderHparams, .model_tensors = kOutsideLayers, .layer_tensors = kLlamaLayer},
      {.name = "qwen2", .model_type = "qwen2", .written_for = {"qwen2"}, .q_width_is_hidden = true,
       .hparams = kDecoderHparams, .model_tensors = kOutsideLayers,
       .layer_tensors = gguf_names_joined(kLlamaLayer, {{"self_attn.q_proj.bias", "attn_q.bias"},
                                                        {"self_attn.k_proj.bias", "attn_k.bias"},
                                                        {"self_attn.v_proj.bias", "attn_v.bias"}})},
      {.name = "qwen3", .model_type = "qwen3", .written_for = {"qwen3"}, .hparams = kDecoderHparams,
       .model_tensors = kOutsideLayers, .layer_tensors = gguf_names_joined(kLlamaLayer, kQkNorms)},
      {.name = "gpt2", .model_type = "gpt2", .written_for = {"gpt2"}, .q_width_is_hidden = true,
       .hparams = kGpt2Hparams, .model_tensors = kGpt2Outside, .layer_tensors = kGpt2Layer, .block = use_gpt2_block},
      {.name = "gemma3", .model_type = "gemma3_text", .written_for = {"gemma3_text"}, .sliding_window = true,
       .attention_scale = GgufAttentionScale::gemma3, .hparams = gemma3_gguf_hparams(), .model_tensors = kOutsideLayers,
       .layer_tensors = kGemma3Layer, .block = give_gemma3_parts},
  };
}

// "<prefix>N.<rest>" -> {N, rest} when N is a layer number.
std::optional<std::pair<std::string, std::string>> split_layer_name(const std::string& name, const std::string& prefix) {
  if (name.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  const size_t dot = name.find('.', prefix.size());
  if (dot == std::string::npos) return std::nullopt;
  std::string layer = name.substr(prefix.size(), dot - prefix.size());
  if (layer.empty() || layer.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::make_pair(std::move(layer), name.substr(dot + 1));
}

std::string names_of_architectures() {
  std::string s;
  for (const auto& a : gguf_architectures()) s += (s.empty() ? "" : ", ") + std::string(a.name);
  return s;
}

// A model size as GGUF stores it. The config's own limits keep every size below 2^32 in practice,
// but a size past them is the user's model, not a bug: say which field could not hold it.
uint32_t gguf_u32_of(int64_t v, const char* what) {
  if (v < 0 || v > int64_t(UINT32_MAX))
    fail(std::string("GGUF export: the model's ") + what + " (" + std::to_string(v) +
         ") does not fit GGUF's 32-bit field");
  return uint32_t(v);
}

bool has_explicit_head_dim(const ModelConfig& c) { return c.head_dim() != c.hidden_size / c.num_attention_heads; }

// The attention scale llama.cpp's graph for the architecture applies to a model of c's sizes.
float llama_cpp_attention_scale(const GgufArchitecture& a, const ModelConfig& c) {
  if (a.attention_scale == GgufAttentionScale::gemma3 && c.num_hidden_layers == 62)
    return 1.0f / std::sqrt(float(c.hidden_size / c.num_attention_heads));
  return 1.0f / std::sqrt(float(c.head_dim()));
}

// The widths of the layers that have a window (0 where none has one); mt::Error naming `where`
// when they differ, since llama.cpp takes one sliding_window.
int64_t gguf_one_window(const ModelConfig& c, const GgufArchitecture& a, const std::string& where) {
  int64_t w = 0;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const int64_t lw = c.attention_window(l);
    if (lw <= 0) continue;
    if (w > 0 && lw != w)
      fail(where + ": llama.cpp's " + a.name + " architecture takes one sliding_window for all its windowed layers; "
               "this model's are " + std::to_string(w) + " and " + std::to_string(lw));
    w = lw;
  }
  return w;
}

}  // namespace

const std::vector<GgufArchitecture>& gguf_architectures() {
  static const std::vector<GgufArchitecture> all = make_gguf_architectures();
  return all;
}

const GgufArchitecture* find_gguf_architecture(const std::string& name) {
  for (const auto& a : gguf_architectures())
    if (name == a.name) return &a;
  return nullptr;
}

std::optional<std::string> gguf_name_of(const GgufArchitecture& a, const std::string& hf) {
  for (const auto& n : a.model_tensors)
    if (hf == n.hf) return std::string(n.gguf);
  if (auto l = split_layer_name(hf, "model.layers."))
    for (const auto& n : a.layer_tensors)
      if (l->second == n.hf) return "blk." + l->first + "." + n.gguf;
  return std::nullopt;
}

std::string gguf_tensor_name(const GgufArchitecture& a, const std::string& hf) {
  if (auto name = gguf_name_of(a, hf)) return *name;
  fail("GGUF: llama.cpp's " + std::string(a.name) + " architecture has no tensor for '" + hf + "'");
}

std::vector<std::string> hf_names_of_gguf_tensor(const GgufArchitecture& a, const std::string& gguf) {
  std::vector<std::string> out;
  for (const auto& n : a.model_tensors)
    if (gguf == n.gguf) out.push_back(n.hf);
  if (auto l = split_layer_name(gguf, "blk."))
    for (const auto& n : a.layer_tensors)
      if (l->second == n.gguf) out.push_back("model.layers." + l->first + "." + n.hf);
  return out;
}

int64_t gguf_rotary_heads(const GgufArchitecture& a, const std::string& hf, const ModelConfig& c) {
  if (!a.interleaved_rope) return 0;
  // Weights only: no architecture that permutes takes q / k biases (see make_gguf_architectures).
  if (hf.find("self_attn.q_proj.weight") != std::string::npos) return c.num_attention_heads;
  if (hf.find("self_attn.k_proj.weight") != std::string::npos) return c.num_key_value_heads;
  return 0;
}

float gguf_value_shift(const std::string& hf, const ModelConfig& c) {
  static const std::string kNormWeight = "norm.weight";  // every norm's weight, as the converter tests
  const bool norm = hf.size() >= kNormWeight.size() &&
                    hf.compare(hf.size() - kNormWeight.size(), kNormWeight.size(), kNormWeight) == 0;
  return norm && !c.layer_norm() ? c.norm_weight_offset : 0.0f;
}

std::vector<GgufSlot> gguf_slots(const GgufArchitecture& a, const std::vector<std::string>& hf_names) {
  std::vector<GgufSlot> slots;
  for (const std::string& hf : hf_names) {
    const std::string gguf = gguf_tensor_name(a, hf);
    auto it = std::find_if(slots.begin(), slots.end(), [&](const GgufSlot& s) { return s.gguf == gguf; });
    if (it == slots.end()) {
      slots.push_back({gguf, {}});
      it = slots.end() - 1;
    }
    it->parts.push_back(hf);
  }
  // A stacked tensor's parts in the table's order (hf_names_of_gguf_tensor lists them so).
  for (GgufSlot& s : slots) {
    if (s.parts.size() < 2) continue;
    std::vector<std::string> ordered;
    for (const std::string& hf : hf_names_of_gguf_tensor(a, s.gguf))
      if (std::find(s.parts.begin(), s.parts.end(), hf) != s.parts.end()) ordered.push_back(hf);
    s.parts = ordered;
  }
  return slots;
}

const GgufArchitecture& gguf_architecture_for(const ModelConfig& c, const std::string& where) {
  const GgufArchitecture* arch = nullptr;
  for (const auto& a : gguf_architectures())
    if (std::find(a.written_for.begin(), a.written_for.end(), c.model_type) != a.written_for.end()) arch = &a;
  if (!arch)
    fail(where + ": GGUF export of a " + c.model_type + " model is not supported: meshtrain writes llama.cpp's " +
         names_of_architectures() + " architectures");
  // Every tensor of the model needs the architecture's name for it: a part llama.cpp's graph for
  // it does not compute (an o or MLP bias, say) is refused rather than dropped.
  for (const ParamShape& p : llama_param_shapes(c, LoraConfig{}))
    if (!gguf_name_of(*arch, p.name))
      fail(where + ": llama.cpp's " + arch->name + " architecture has no tensor for " + p.name +
           " (a part of this " + c.model_type + " model it does not compute), so it is not written as GGUF");
  if (arch->q_width_is_hidden && c.q_dim() != c.hidden_size)
    fail(where + ": llama.cpp's " + arch->name + " architecture needs heads x head_dim (" +
         std::to_string(c.q_dim()) + ") to be the hidden size (" + std::to_string(c.hidden_size) + ")");
  const bool scaled = c.rope_scaling.factor > 0.0f;
  const bool linear_keys = std::find(arch->hparams.begin(), arch->hparams.end(), GgufHparam::rope_scaling_linear) !=
                           arch->hparams.end();
  if (scaled && !c.rope_scaling.linear && !arch->rope_freqs)
    fail(where + ": llama3 rope scaling on a " + c.model_type + " model: llama.cpp's " + arch->name +
         " architecture does not read rope_freqs.weight, so it is not written as GGUF");
  if (scaled && c.rope_scaling.linear && !linear_keys)
    fail(where + ": linear rope scaling on a " + c.model_type + " model: meshtrain writes it for llama.cpp's gemma3 "
         "architecture only, so it is not written as GGUF");
  // llama.cpp's graph fixes the scale (no key sets it); another one would be computed otherwise.
  const float want = llama_cpp_attention_scale(*arch, c);
  if (c.attention_scale > 0.0f && std::fabs(c.attention_scale - want) > 1e-6f * want)
    fail(where + ": the model scales attention scores by " + std::to_string(c.attention_scale) +
         " (query_pre_attn_scalar " + std::to_string(1.0 / (double(c.attention_scale) * c.attention_scale)) +
         "); llama.cpp's " + arch->name + " architecture scales them by " + std::to_string(want) +
         ", so it is not written as GGUF");
  if (arch->sliding_window && gguf_one_window(c, *arch, where) > 0 && c.rope_local_theta <= 0.0f && scaled)
    fail(where + ": rope scaling on windowed layers without a local RoPE base: llama.cpp's " + arch->name +
         " architecture scales the global layers only, so it is not written as GGUF");
  return *arch;
}

std::vector<GgufKV> gguf_hparam_kvs(const GgufArchitecture& a, const ModelConfig& c) {
  const std::string p = std::string(a.name) + ".";
  std::vector<GgufKV> kvs;
  auto u32 = [&](const char* key, int64_t v, const char* what) { kvs.push_back({p + key, GgufValue::u32(gguf_u32_of(v, what))}); };
  for (GgufHparam h : a.hparams) {
    switch (h) {
      case GgufHparam::context_length: u32("context_length", c.max_position_embeddings, "context length"); break;
      case GgufHparam::embedding_length: u32("embedding_length", c.hidden_size, "hidden size"); break;
      case GgufHparam::block_count: u32("block_count", c.num_hidden_layers, "layers"); break;
      case GgufHparam::feed_forward_length: u32("feed_forward_length", c.intermediate_size, "intermediate size"); break;
      case GgufHparam::rope_dimension_count: u32("rope.dimension_count", c.head_dim(), "head dim"); break;
      case GgufHparam::head_count: u32("attention.head_count", c.num_attention_heads, "heads"); break;
      case GgufHparam::head_count_kv: u32("attention.head_count_kv", c.num_key_value_heads, "kv heads"); break;
      case GgufHparam::rms_norm_eps: kvs.push_back({p + "attention.layer_norm_rms_epsilon", GgufValue::f32(c.rms_norm_eps)}); break;
      case GgufHparam::layer_norm_eps: kvs.push_back({p + "attention.layer_norm_epsilon", GgufValue::f32(c.rms_norm_eps)}); break;
      case GgufHparam::rope_freq_base: kvs.push_back({p + "rope.freq_base", GgufValue::f32(c.rope_theta)}); break;
      case GgufHparam::rope_freq_base_swa:
        // Without a local base the windowed layers rotate as the others (model/config.h).
        if (gguf_one_window(c, a, "GGUF export") > 0)
          kvs.push_back({p + "rope.freq_base_swa", GgufValue::f32(c.rope_local_theta > 0.0f ? c.rope_local_theta : c.rope_theta)});
        break;
      case GgufHparam::rope_scaling_linear:
        if (c.rope_scaling.factor > 0.0f) {
          kvs.push_back({p + "rope.scaling.type", GgufValue::str("linear")});
          kvs.push_back({p + "rope.scaling.factor", GgufValue::f32(c.rope_scaling.factor)});
        }
        break;
      case GgufHparam::sliding_window:
        if (const int64_t w = gguf_one_window(c, a, "GGUF export"); w > 0) {
          u32("attention.sliding_window", w, "sliding window");
          std::vector<bool> windowed;
          for (int64_t l = 0; l < c.num_hidden_layers; ++l) windowed.push_back(c.attention_window(l) > 0);
          kvs.push_back({p + "attention.sliding_window_pattern", GgufValue::bool_array(windowed)});
        }
        break;
      case GgufHparam::vocab_size: u32("vocab_size", c.vocab_size, "vocab size"); break;
      case GgufHparam::head_length:
        if (has_explicit_head_dim(c)) {
          u32("attention.key_length", c.head_dim(), "head dim");
          u32("attention.value_length", c.head_dim(), "head dim");
        }
        break;
    }
  }
  return kvs;
}

namespace {

// The windowed layers of a file (llama.cpp's load_swa_pattern): a bool a layer, or every n-th
// layer global (n from the key, else `fallback`); window w on the others.
std::vector<int64_t> gguf_layer_windows(const GgufFile& g, const std::string& key, int64_t layers, int64_t w,
                                        uint32_t fallback) {
  std::vector<int64_t> out(size_t(layers), 0);
  const GgufValue* v = g.find(key);
  if (v && v->type == GgufType::array) {
    if (v->elem != GgufType::boolean || int64_t(v->ints.size()) != layers)
      fail(g.label + ": " + key + " should be one bool per layer (" + std::to_string(layers) + ")");
    for (int64_t l = 0; l < layers; ++l) out[size_t(l)] = v->ints[size_t(l)] ? w : 0;
    return out;
  }
  const uint64_t n = v ? g.get_u32(key) : fallback;
  for (int64_t l = 0; l < layers; ++l) out[size_t(l)] = n == 0 || uint64_t(l) % n < n - 1 ? w : 0;
  return out;
}

}  // namespace

void read_gguf_hparams(const GgufArchitecture& a, const GgufFile& g, ModelConfig& c) {
  const std::string p = std::string(a.name) + ".";
  auto size = [&](const std::string& key) { return int64_t(g.get_u32(p + key)); };
  auto has = [&](const std::string& key) { return g.find(p + key) != nullptr; };
  int64_t rope_dims = 0, key_length = 0, value_length = 0, window = 0;
  float local_base = 0.0f;
  for (GgufHparam h : a.hparams) {
    switch (h) {
      case GgufHparam::context_length: c.max_position_embeddings = size("context_length"); break;
      case GgufHparam::embedding_length: c.hidden_size = size("embedding_length"); break;
      case GgufHparam::block_count: c.num_hidden_layers = size("block_count"); break;
      case GgufHparam::feed_forward_length: c.intermediate_size = size("feed_forward_length"); break;
      case GgufHparam::rope_dimension_count: rope_dims = has("rope.dimension_count") ? size("rope.dimension_count") : 0; break;
      case GgufHparam::head_count: c.num_attention_heads = size("attention.head_count"); break;
      case GgufHparam::head_count_kv: c.num_key_value_heads = has("attention.head_count_kv") ? size("attention.head_count_kv") : 0; break;
      case GgufHparam::rms_norm_eps: c.rms_norm_eps = g.get_f32(p + "attention.layer_norm_rms_epsilon"); break;
      case GgufHparam::layer_norm_eps: c.rms_norm_eps = g.get_f32(p + "attention.layer_norm_epsilon"); break;
      case GgufHparam::rope_freq_base: c.rope_theta = has("rope.freq_base") ? g.get_f32(p + "rope.freq_base") : 10000.0f; break;
      case GgufHparam::rope_freq_base_swa:
        local_base = has("rope.freq_base_swa") ? g.get_f32(p + "rope.freq_base_swa") : 10000.0f;  // llama.cpp's default
        break;
      case GgufHparam::rope_scaling_linear:
        if (has("rope.scaling.type") && g.get_str(p + "rope.scaling.type") != "linear" && g.get_str(p + "rope.scaling.type") != "none")
          fail(g.label + ": " + p + "rope.scaling.type '" + g.get_str(p + "rope.scaling.type") + "' is not linear");
        if (has("rope.scaling.factor") && g.get_f32(p + "rope.scaling.factor") != 1.0f)
          c.rope_scaling.factor = g.get_f32(p + "rope.scaling.factor"), c.rope_scaling.linear = true;
        break;
      case GgufHparam::sliding_window: window = has("attention.sliding_window") ? size("attention.sliding_window") : 0; break;
      case GgufHparam::vocab_size:
        c.vocab_size = has("vocab_size") ? size("vocab_size") : int64_t(g.tensor("token_embd.weight").ne.back());
        break;
      case GgufHparam::head_length:
        key_length = has("attention.key_length") ? size("attention.key_length") : 0;
        value_length = has("attention.value_length") ? size("attention.value_length") : key_length;
        break;
    }
  }
  if (c.num_key_value_heads == 0) c.num_key_value_heads = c.num_attention_heads;
  if (key_length != value_length)
    fail(g.label + ": " + p + "attention.key_length (" + std::to_string(key_length) + ") and value_length (" +
         std::to_string(value_length) + ") differ; meshtrain's heads have one width");
  if (key_length > 0 && c.num_attention_heads > 0 && key_length != c.hidden_size / c.num_attention_heads)
    c.head_dim_override = key_length;
  c.layer_window.clear();
  if (window > 0) {
    if (c.num_hidden_layers <= 0 || c.num_hidden_layers > 4096)  // llama.cpp's LLAMA_MAX_LAYERS is 512
      fail(g.label + ": " + p + "block_count " + std::to_string(c.num_hidden_layers) + " is out of range");
    c.layer_window = gguf_layer_windows(g, p + "attention.sliding_window_pattern", c.num_hidden_layers, window, 6);
  }
  if (local_base > 0.0f) c.rope_local_theta = local_base;
  c.validate();
  if (a.attention_scale != GgufAttentionScale::head_dim) c.attention_scale = llama_cpp_attention_scale(a, c);
  if (rope_dims != 0 && rope_dims != c.head_dim())
    fail(g.label + ": " + p + "rope.dimension_count (" + std::to_string(rope_dims) + ") is not the head dim (" +
         std::to_string(c.head_dim()) + "): partial rotary is not supported");
}

std::string gguf_window_note(const GgufArchitecture& a, const ModelConfig& c) {
  if (a.sliding_window) return "";
  int64_t narrowest = 0, layers = 0;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const int64_t w = c.attention_window(l);
    if (w <= 0 || w >= c.max_position_embeddings) continue;  // a window no context reaches changes nothing
    ++layers;
    narrowest = narrowest == 0 ? w : std::min(narrowest, w);
  }
  if (layers == 0) return "";
  return std::string("llama.cpp's ") + a.name + " architecture has no sliding window: the windowed layers (" +
         std::to_string(layers) + " of " + std::to_string(c.num_hidden_layers) +
         ") attend to the whole context there, so llama.cpp's output equals meshtrain's for contexts of up to " +
         std::to_string(narrowest) + " tokens only";
}

}  // namespace mt
