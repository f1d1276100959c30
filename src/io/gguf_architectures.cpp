#include "io/gguf_architectures.h"

#include <algorithm>

#include "core/error.h"
#include "model/transformer.h"
#include "model/param_shapes.h"

namespace mt {

namespace {

// Names read from llama.cpp's gguf-py/gguf/constants.py (MODEL_TENSOR names) and its converter's
// tensor map; the names the three architectures share.
const std::vector<GgufTensorName> kOutsideLayers = {
    {kEmbedName, "token_embd.weight"},
    {kFinalNormName, "output_norm.weight"},
    {kHeadName, "output.weight"},  // absent with tied embeddings: llama.cpp then reads token_embd
};

std::vector<GgufTensorName> llama_layer_tensors() {
  return {
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
}

std::vector<GgufTensorName> with_tensors(std::vector<GgufTensorName> names, const std::vector<GgufTensorName>& more) {
  names.insert(names.end(), more.begin(), more.end());
  return names;
}

const std::vector<GgufHparam> kDecoderHparams = {
    GgufHparam::context_length, GgufHparam::embedding_length, GgufHparam::block_count,
    GgufHparam::feed_forward_length, GgufHparam::rope_dimension_count, GgufHparam::head_count,
    GgufHparam::head_count_kv, GgufHparam::rms_norm_eps, GgufHparam::rope_freq_base,
    GgufHparam::vocab_size, GgufHparam::head_length,
};

std::vector<GgufArchitecture> make_architectures() {
  std::vector<GgufArchitecture> all;
  // LLaMA, and Mistral as llama.cpp's converter writes it (MistralForCausalLM is its Transformer).
  // llama.cpp's llama graph also takes optional biases, but older llama.cpp ignores them, so a
  // biased model is not written as llama.
  GgufArchitecture llama;
  llama.name = "llama";
  llama.model_type = "llama";
  llama.written_for = {"llama", "mistral"};
  llama.interleaved_rope = true;
  llama.rope_freqs = true;
  llama.hparams = kDecoderHparams;
  llama.model_tensors = kOutsideLayers;
  llama.layer_tensors = llama_layer_tensors();
  all.push_back(llama);

  // Qwen2 / Qwen2.5: biases on q, k and v (llama.cpp's qwen2 has no o bias and sizes q and o
  // [hidden, hidden]); RoPE on halves as HF's, so no permutation (its converter has none).
  GgufArchitecture qwen2;
  qwen2.name = "qwen2";
  qwen2.model_type = "qwen2";
  qwen2.written_for = {"qwen2"};
  qwen2.q_width_is_hidden = true;
  qwen2.hparams = kDecoderHparams;
  qwen2.model_tensors = kOutsideLayers;
  qwen2.layer_tensors = with_tensors(llama_layer_tensors(), {{"self_attn.q_proj.bias", "attn_q.bias"},
                                                             {"self_attn.k_proj.bias", "attn_k.bias"},
                                                             {"self_attn.v_proj.bias", "attn_v.bias"}});
  all.push_back(qwen2);

  // Qwen3: RMSNorm over each head of q and k (attn_q_norm / attn_k_norm, [head_dim]); head_dim
  // free (key_length / value_length). llama.cpp's qwen3 loads no o bias, so attention_bias
  // (biases on q, k, v and o) is refused: the biases have no names here.
  GgufArchitecture qwen3;
  qwen3.name = "qwen3";
  qwen3.model_type = "qwen3";
  qwen3.written_for = {"qwen3"};
  qwen3.hparams = kDecoderHparams;
  qwen3.model_tensors = kOutsideLayers;
  qwen3.layer_tensors = with_tensors(llama_layer_tensors(), {{"self_attn.q_norm.weight", "attn_q_norm.weight"},
                                                             {"self_attn.k_norm.weight", "attn_k_norm.weight"}});
  all.push_back(qwen3);
  return all;
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

}  // namespace

const std::vector<GgufArchitecture>& gguf_architectures() {
  static const std::vector<GgufArchitecture> all = make_architectures();
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

std::optional<std::string> hf_name_of_gguf_tensor(const GgufArchitecture& a, const std::string& gguf) {
  for (const auto& n : a.model_tensors)
    if (gguf == n.gguf) return std::string(n.hf);
  if (auto l = split_layer_name(gguf, "blk."))
    for (const auto& n : a.layer_tensors)
      if (l->second == n.gguf) return "model.layers." + l->first + "." + n.hf;
  return std::nullopt;
}

int64_t gguf_rotary_heads(const GgufArchitecture& a, const std::string& hf, const ModelConfig& c) {
  if (!a.interleaved_rope) return 0;
  // Weights only: no architecture that permutes takes q / k biases (see make_architectures).
  if (hf.find("self_attn.q_proj.weight") != std::string::npos) return c.num_attention_heads;
  if (hf.find("self_attn.k_proj.weight") != std::string::npos) return c.num_key_value_heads;
  return 0;
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
  if (!arch->rope_freqs && c.rope_scaling.factor > 0.0f)
    fail(where + ": llama3 rope scaling on a " + c.model_type + " model: llama.cpp's " + arch->name +
         " architecture does not read rope_freqs.weight, so it is not written as GGUF");
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
      case GgufHparam::rope_freq_base: kvs.push_back({p + "rope.freq_base", GgufValue::f32(c.rope_theta)}); break;
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

void read_gguf_hparams(const GgufArchitecture& a, const GgufFile& g, ModelConfig& c) {
  const std::string p = std::string(a.name) + ".";
  auto size = [&](const std::string& key) { return int64_t(g.get_u32(p + key)); };
  auto has = [&](const std::string& key) { return g.find(p + key) != nullptr; };
  int64_t rope_dims = 0, key_length = 0, value_length = 0;
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
      case GgufHparam::rope_freq_base: c.rope_theta = has("rope.freq_base") ? g.get_f32(p + "rope.freq_base") : 10000.0f; break;
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
  c.validate();
  if (rope_dims != 0 && rope_dims != c.head_dim())
    fail(g.label + ": " + p + "rope.dimension_count (" + std::to_string(rope_dims) + ") is not the head dim (" +
         std::to_string(c.head_dim()) + "): partial rotary is not supported");
}

std::string gguf_window_note(const GgufArchitecture& a, const ModelConfig& c) {
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
