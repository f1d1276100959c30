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

// A mixture of experts (llama.cpp's src/models/llama.cpp, qwen3moe.cpp, olmoe.cpp): the router
// ffn_gate_inp [experts, hidden] and each projection's experts stacked into one ffn_*_exps tensor,
// as llama.cpp's converter stacks them. HF's Qwen3-MoE and OLMoE hold them under "mlp.", Mixtral
// under "block_sparse_moe." with w1 (gate), w3 (up), w2 (down).
const std::vector<GgufTensorName> kMoeLayer = {
    {"mlp.gate.weight", "ffn_gate_inp.weight"},
    {"mlp.experts.*.gate_proj.weight", "ffn_gate_exps.weight"},
    {"mlp.experts.*.up_proj.weight", "ffn_up_exps.weight"},
    {"mlp.experts.*.down_proj.weight", "ffn_down_exps.weight"},
};
const std::vector<GgufTensorName> kMixtralLayer = {
    {"block_sparse_moe.gate.weight", "ffn_gate_inp.weight"},
    {"block_sparse_moe.experts.*.w1.weight", "ffn_gate_exps.weight"},
    {"block_sparse_moe.experts.*.w3.weight", "ffn_up_exps.weight"},
    {"block_sparse_moe.experts.*.w2.weight", "ffn_down_exps.weight"},
};

// The attention and norms of a LLaMA layer, without its dense MLP (the sparse architectures').
std::vector<GgufTensorName> attention_of_llama_layer() {
  std::vector<GgufTensorName> out;
  for (const GgufTensorName& n : kLlamaLayer)
    if (std::string(n.hf).rfind("mlp.", 0) != 0) out.push_back(n);
  return out;
}

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

// The decoder's keys and the experts' (expert_width where llama.cpp reads one).
std::vector<GgufHparam> moe_gguf_hparams(bool expert_width) {
  std::vector<GgufHparam> h = kDecoderHparams;
  h.push_back(GgufHparam::expert_count);
  if (expert_width) h.push_back(GgufHparam::expert_width);
  return h;
}

// OLMoE's block read back: q/k norms (llama.cpp's olmoe requires them) over the whole projections.
void give_olmoe_parts(ModelConfig& c) { c.qk_norm = c.qk_norm_whole = true; }

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
// The mixtures of experts (each llama.cpp graph calls build_moe_ffn with softmax gating and a
// fixed choice of renormalising the top k's weights, which the model must share):
// - llama also holds Mixtral, as llama.cpp's converter writes it (MixtralForCausalLM is its
//   LlamaModel): q / k rows permuted, expert_count > 0, the experts feed_forward_length wide,
//   the top k renormalised.
// - qwen3moe: Qwen3's attention (per-head q/k norms, free head_dim, rotate-half RoPE), experts
//   expert_feed_forward_length wide, the top k renormalised (Qwen3-MoE's norm_topk_prob true).
// - olmoe: LLaMA's attention with q and k each RMS-normalised over its whole projection, which
//   llama.cpp sizes [hidden] (so no GQA and heads x head_dim = hidden), rotate-half RoPE, the
//   experts feed_forward_length wide, weights not renormalised; output.weight required.
std::vector<GgufArchitecture> make_gguf_architectures() {
  return {
      {.name = "llama", .model_type = "llama", .written_for = {"llama", "mistral", "mixtral"}, .interleaved_rope = true,
       .rope_freqs = true, .moe = GgufMoe::optional, .moe_renormalize = true, .moe_model_type = "mixtral",
       .hparams = moe_gguf_hparams(false), .model_tensors = kOutsideLayers,
       .layer_tensors = gguf_names_joined(kLlamaLayer, kMixtralLayer)},
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
      {.name = "qwen3moe", .model_type = "qwen3_moe", .written_for = {"qwen3_moe"}, .moe = GgufMoe::required,
       .moe_renormalize = true, .hparams = moe_gguf_hparams(true), .model_tensors = kOutsideLayers,
       .layer_tensors = gguf_names_joined(gguf_names_joined(attention_of_llama_layer(), kQkNorms), kMoeLayer)},
      {.name = "olmoe", .model_type = "olmoe", .written_for = {"olmoe"}, .q_width_is_hidden = true,
       .moe = GgufMoe::required, .kv_width_is_hidden = true, .output_required = true,
       .hparams = moe_gguf_hparams(false), .model_tensors = kOutsideLayers,
       .layer_tensors = gguf_names_joined(gguf_names_joined(attention_of_llama_layer(), kQkNorms), kMoeLayer),
       .block = give_olmoe_parts},
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

// "…experts.<E>.…" -> {"…experts.*.…", E}; nullopt for a name without an expert's index.
std::optional<std::pair<std::string, int64_t>> expert_pattern(const std::string& tail) {
  static const std::string kExperts = "experts.";
  const size_t at = tail.find(kExperts);
  if (at == std::string::npos) return std::nullopt;
  const size_t from = at + kExperts.size(), dot = tail.find('.', from);
  if (dot == std::string::npos || dot == from || dot - from > 9) return std::nullopt;
  const std::string index = tail.substr(from, dot - from);
  if (index.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::make_pair(tail.substr(0, from) + "*" + tail.substr(dot), std::stoll(index));
}

bool is_expert_entry(const GgufTensorName& n) { return std::string(n.hf).find('*') != std::string::npos; }

// The table entry naming a layer tensor's tail, and its expert's index (-1: not an expert's).
std::optional<std::pair<const GgufTensorName*, int64_t>> layer_entry(const GgufArchitecture& a, const std::string& tail) {
  for (const auto& n : a.layer_tensors)
    if (tail == n.hf) return std::make_pair(&n, int64_t(-1));
  if (auto e = expert_pattern(tail))
    for (const auto& n : a.layer_tensors)
      if (e->first == n.hf) return std::make_pair(&n, e->second);
  return std::nullopt;
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

// What llama.cpp's graph for the architecture would compute otherwise in a mixture of experts
// (or in a model its loader would refuse), as one line naming `where`.
void check_gguf_experts(const GgufArchitecture& a, const ModelConfig& c, const std::string& where) {
  const std::string arch = std::string("llama.cpp's ") + a.name + " architecture";
  if (a.moe == GgufMoe::required && !c.moe())
    fail(where + ": " + arch + " is a mixture of experts; this " + c.model_type + " model has no experts");
  if (a.output_required && c.tie_word_embeddings)
    fail(where + ": " + arch + " requires output.weight; this model ties its embeddings to the output, "
         "so it is not written as GGUF");
  if (a.kv_width_is_hidden && c.kv_dim() != c.hidden_size)
    fail(where + ": " + arch + " sizes k and its norm as the hidden size (" + std::to_string(c.hidden_size) +
         "); this model's kv heads x head_dim is " + std::to_string(c.kv_dim()) + " (grouped-query attention)");
  if (!c.moe()) return;
  if (a.moe == GgufMoe::none)
    fail(where + ": " + arch + " has no experts; this " + c.model_type + " model is a mixture of experts");
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    if (!c.moe_layer(l))
      fail(where + ": " + arch + " puts experts on every layer; this model's layer " + std::to_string(l) +
           " is dense (decoder_sparse_step " + std::to_string(c.decoder_sparse_step) +
           ", mlp_only_layers), so it is not written as GGUF");
  if (c.moe_capacity_factor > 0.0f)
    fail(where + ": the model drops choices past an expert's capacity (moe_capacity_factor " +
         std::to_string(c.moe_capacity_factor) + "); " + arch + " computes every choice, so it is not written as GGUF");
  if (c.norm_topk_prob != a.moe_renormalize)
    fail(where + ": " + arch + (a.moe_renormalize ? " renormalises" : " does not renormalise") +
         " the chosen experts' weights; this model " + (c.norm_topk_prob ? "does" : "does not") +
         " (norm_topk_prob " + (c.norm_topk_prob ? "true" : "false") + "), so it is not written as GGUF");
  const bool width_key = std::find(a.hparams.begin(), a.hparams.end(), GgufHparam::expert_width) != a.hparams.end();
  if (!width_key && c.moe_intermediate_size != c.intermediate_size)
    fail(where + ": " + arch + " sizes the experts by feed_forward_length; this model's experts are " +
         std::to_string(c.moe_intermediate_size) + " wide and intermediate_size is " + std::to_string(c.intermediate_size));
  if (c.qk_norm && c.qk_norm_whole != a.kv_width_is_hidden)
    fail(where + ": " + arch + " normalises q and k " + (a.kv_width_is_hidden ? "over the whole projections" : "per head") +
         "; this model " + (c.qk_norm_whole ? "over the whole projections" : "per head"));
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
    if (auto entry = layer_entry(a, l->second)) return "blk." + l->first + "." + entry->first->gguf;
  return std::nullopt;
}

std::string gguf_tensor_name(const GgufArchitecture& a, const std::string& hf) {
  if (auto name = gguf_name_of(a, hf)) return *name;
  fail("GGUF: llama.cpp's " + std::string(a.name) + " architecture has no tensor for '" + hf + "'");
}

std::vector<std::string> hf_names_of_gguf_tensor(const GgufArchitecture& a, const std::string& gguf, int64_t experts) {
  std::vector<std::string> out;
  for (const auto& n : a.model_tensors)
    if (gguf == n.gguf) out.push_back(n.hf);
  if (auto l = split_layer_name(gguf, "blk."))
    for (const auto& n : a.layer_tensors) {
      if (l->second != n.gguf) continue;
      const std::string hf = "model.layers." + l->first + "." + n.hf;
      if (!is_expert_entry(n)) {
        out.push_back(hf);
        continue;
      }
      const size_t star = hf.find('*');
      for (int64_t e = 0; e < experts; ++e) out.push_back(hf.substr(0, star) + std::to_string(e) + hf.substr(star + 1));
    }
  return out;
}

bool gguf_stacks_experts(const GgufArchitecture& a, const std::string& gguf) {
  if (auto l = split_layer_name(gguf, "blk."))
    for (const auto& n : a.layer_tensors)
      if (l->second == n.gguf && is_expert_entry(n)) return true;
  return false;
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
  // A stacked tensor's parts in the table's order (hf_names_of_gguf_tensor lists them so); a stack
  // of experts in expert order, every expert from 0 present once.
  for (GgufSlot& s : slots) {
    if (gguf_stacks_experts(a, s.gguf)) {
      s.experts = true;
      std::vector<std::string> ordered(s.parts.size());
      for (const std::string& hf : s.parts) {
        const auto l = split_layer_name(hf, "model.layers.");
        const auto e = l ? expert_pattern(l->second) : std::nullopt;
        MT_CHECK(e && e->second < int64_t(ordered.size()) && ordered[size_t(e->second)].empty(),
                 "GGUF: the experts of " + s.gguf + " are not 0.." + std::to_string(ordered.size() - 1) + " once each");
        ordered[size_t(e->second)] = hf;
      }
      s.parts = ordered;
      continue;
    }
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
  check_gguf_experts(*arch, c, where);
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
      case GgufHparam::expert_count:
        if (c.moe()) {
          u32("expert_count", c.num_experts, "experts");
          u32("expert_used_count", c.num_experts_per_tok, "experts a token");
        }
        break;
      case GgufHparam::expert_width:
        if (c.moe()) u32("expert_feed_forward_length", c.moe_intermediate_size, "expert width");
        break;
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
      case GgufHparam::expert_count:
        c.num_experts = has("expert_count") ? size("expert_count") : 0;
        if (c.num_experts > 0) c.num_experts_per_tok = size("expert_used_count");
        break;
      case GgufHparam::expert_width:
        if (has("expert_feed_forward_length")) c.moe_intermediate_size = size("expert_feed_forward_length");
        break;
    }
  }
  if (a.moe == GgufMoe::required && c.num_experts <= 0)
    fail(g.label + ": " + p + "expert_count is missing or 0; llama.cpp's " + a.name + " is a mixture of experts");
  if (c.num_experts > 0) {
    // llama.cpp computes every layer sparse, its top k's weights renormalised as the architecture
    // fixes; an expert width not given is feed_forward_length's (llama, olmoe), or qwen3moe's
    // fallback, n_ff / expert_used_count.
    if (c.moe_intermediate_size <= 0)
      c.moe_intermediate_size = std::find(a.hparams.begin(), a.hparams.end(), GgufHparam::expert_width) != a.hparams.end()
                                    ? c.intermediate_size / std::max<int64_t>(c.num_experts_per_tok, 1)
                                    : c.intermediate_size;
    c.norm_topk_prob = a.moe_renormalize;
    c.decoder_sparse_step = 1;
    c.mlp_only_layers.clear();
    if (*a.moe_model_type) c.model_type = a.moe_model_type;
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
