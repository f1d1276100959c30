#include "io/gguf_model.h"

#include <algorithm>

#include "core/error.h"
#include "io/gguf_architectures.h"
#include "io/llama2c.h"
#include "io/weight_shapes.h"
#include "model/param_shapes.h"

namespace mt {

namespace {

const GgufArchitecture& architecture_of(const GgufFile& g) {
  const std::string& name = g.get_str("general.architecture");
  const GgufArchitecture* a = find_gguf_architecture(name);
  if (!a) {
    std::string known;
    for (const auto& k : gguf_architectures()) known += (known.empty() ? "" : ", ") + std::string(k.name);
    fail(g.label + ": general.architecture is '" + name + "'; meshtrain reads " + known);
  }
  return *a;
}

// Whether the file holds the layer-0 tensor of HF name `hf` (a part of the block: a bias, a norm).
bool holds(const GgufFile& g, const GgufArchitecture& a, const std::string& hf) {
  const auto name = gguf_name_of(a, "model.layers.0." + hf);
  return name && g.find_tensor(*name);
}

}  // namespace

ModelConfig gguf_model_config(const GgufFile& g) {
  const GgufArchitecture& arch = architecture_of(g);
  if (g.find_tensor("rope_freqs.weight"))
    fail(g.label + ": rope_freqs.weight (llama3 rope scaling) cannot be read back: the file keeps the "
         "factors, not the scaling's parameters");
  ModelConfig c;
  c.model_type = arch.model_type;
  if (arch.block) arch.block(c);
  read_gguf_hparams(arch, g, c);
  // The block's parts are the tensors the file holds (llama.cpp loads them where present).
  c.qkv_bias = holds(g, arch, "self_attn.q_proj.bias");
  c.o_bias = holds(g, arch, "self_attn.o_proj.bias");
  c.mlp_bias = holds(g, arch, "mlp.down_proj.bias");
  c.qk_norm = holds(g, arch, "self_attn.q_norm.weight");
  // An HF llama config cannot name a head_dim of its own; Mistral's can, with the same block.
  if (c.model_type == std::string("llama") && c.head_dim_override > 0) c.model_type = "mistral";
  c.tie_word_embeddings = g.find_tensor("output.weight") == nullptr;
  c.validate();

  HeldTensors held;
  for (const auto& t : g.tensors)
    for (const std::string& hf : hf_names_of_gguf_tensor(arch, t.name, c.num_experts)) held.names.push_back(hf);
  std::vector<ParamShape> expected = llama_param_shapes(c, LoraConfig{});
  held.shape = [&g, &arch, &expected, &c](const std::string& hf) -> std::optional<std::vector<int64_t>> {
    const auto name = gguf_name_of(arch, hf);
    const GgufTensorInfo* t = name ? g.find_tensor(*name) : nullptr;
    if (!t) return std::nullopt;
    // A stack of experts [experts, out, in]: each expert's own [out, in] when it holds one per expert.
    if (gguf_stacks_experts(arch, *name)) {
      const std::vector<int64_t> s = t->shape();
      return s.size() == 3 && s[0] == c.num_experts ? std::vector<int64_t>(s.begin() + 1, s.end()) : s;
    }
    const std::vector<std::string> parts = hf_names_of_gguf_tensor(arch, *name);
    if (parts.size() < 2) return t->shape();
    // A stacked tensor (attn_qkv): the part's own shape when the rows are the parts' together.
    std::vector<int64_t> whole, own;
    for (const ParamShape& p : expected) {
      if (std::find(parts.begin(), parts.end(), p.name) == parts.end()) continue;
      if (whole.empty()) whole = p.shape;
      else whole[0] += p.shape[0];
      if (p.name == hf) own = p.shape;
    }
    return t->shape() == whole ? own : t->shape();
  };
  // The shapes are checked under their HF names, so a message names the HF tensor.
  check_held_shapes(c, LoraConfig{}, /*adapters=*/false, held, "", g.label);
  return c;
}

void load_gguf_weights(const GgufFile& g, Transformer& model) {
  const ModelConfig& c = model.config();
  const GgufArchitecture& arch = architecture_of(g);
  std::vector<std::string> names;
  for (const auto& p : model.base().params()) names.push_back(p.name);
  for (const GgufSlot& slot : gguf_slots(arch, names)) {
    const std::vector<float> whole = g.tensor_f32(slot.gguf);
    size_t at = 0;  // a stacked tensor's parts follow one another by rows
    for (const std::string& part : slot.parts) {
      Param& p = model.base().get(part);
      MT_CHECK(at + size_t(p.numel) <= whole.size(), "GGUF tensor smaller than its parts: " + slot.gguf);
      std::vector<float> v(whole.begin() + long(at), whole.begin() + long(at + size_t(p.numel)));
      at += size_t(p.numel);
      if (const int64_t heads = gguf_rotary_heads(arch, part, c)) {  // interleaved -> rotate-half rows
        std::vector<float> hf(v.size());
        permute_rotary_rows(v.data(), hf.data(), heads, c.head_dim(), p.shape.back());
        v.swap(hf);
      }
      const float shift = gguf_value_shift(part, c);
      for (float& x : v) x -= shift;
      model.base().set_values(p, v.data());
    }
  }
}

}  // namespace mt
