#include "io/gpt2_layout.h"

#include <algorithm>
#include <cstdlib>

#include "core/error.h"
#include "core/shape_string.h"
#include "model/transformer.h"
#include "model/param_shapes.h"

namespace mt {

namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

int64_t elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// A projection's HF module and, for q / k / v, its rows of the fused c_attn.
Gpt2Part gpt2_projection(const std::string& layer, const std::string& proj, const std::string& leaf,
                         const std::vector<int64_t>& shape, const ModelConfig& c) {
  const bool weight = leaf == "weight";
  Gpt2Part part;
  if (proj == "q" || proj == "k" || proj == "v") {
    const int64_t qd = c.q_dim(), kv = c.kv_dim(), fused = qd + 2 * kv;
    part.hf_name = layer + "attn.c_attn." + leaf;
    part.first = proj == "q" ? 0 : proj == "k" ? qd : qd + kv;
    part.count = proj == "q" ? qd : kv;
    part.hf_shape = weight ? std::vector<int64_t>{c.hidden_size, fused} : std::vector<int64_t>{fused};
  } else {
    const char* module = proj == "o" ? "attn.c_proj." : proj == "up" ? "mlp.c_fc." : "mlp.c_proj.";
    part.hf_name = layer + module + leaf;
    part.hf_shape = weight ? std::vector<int64_t>{shape[1], shape[0]} : shape;
  }
  part.conv1d = weight;
  return part;
}

}  // namespace

Gpt2Part gpt2_part(const std::string& name, const std::vector<int64_t>& shape, const ModelConfig& c) {
  if (name == kEmbedName) return {"wte.weight", shape};
  if (name == kPositionEmbedName) return {"wpe.weight", shape};
  const std::string final_norm = std::string(kFinalNormPrefix) + ".";
  if (starts_with(name, final_norm)) return {"ln_f." + name.substr(final_norm.size()), shape};
  const std::string layers = "model.layers.";
  if (starts_with(name, layers)) {
    const size_t dot = name.find('.', layers.size());
    const std::string layer = "h." + name.substr(layers.size(), dot - layers.size()) + ".";
    const std::string rest = name.substr(dot + 1);
    const std::string leaf = rest.substr(rest.rfind('.') + 1);
    if (starts_with(rest, "input_layernorm.")) return {layer + "ln_1." + leaf, shape};
    if (starts_with(rest, "post_attention_layernorm.")) return {layer + "ln_2." + leaf, shape};
    for (const char* proj : {"q", "k", "v", "o", "up", "down"}) {
      const std::string module = std::string(starts_with(rest, "mlp.") ? "mlp." : "self_attn.") + proj + "_proj.";
      if (rest == module + leaf) return gpt2_projection(layer, proj, leaf, shape, c);
    }
  }
  fail("GPT-2 has no tensor for '" + name + "'");
}

bool gpt2_lora_targets(const std::vector<std::string>& targets) {
  for (const std::string& t : targets)
    if (t == "c_attn" || t == "c_proj" || t == "c_fc") return true;
  return false;
}

std::vector<Gpt2AdapterTensor> gpt2_peft_tensors(const std::vector<std::pair<std::string, std::vector<int64_t>>>& ours) {
  std::vector<Gpt2AdapterTensor> out;
  const std::string layers = "model.layers.";
  for (const auto& [name, shape] : ours) {
    const size_t lora = name.find(".lora_");
    if (lora == std::string::npos) fail("GPT-2 adapter: '" + name + "' is not an adapter");
    const std::string module = name.substr(0, lora), leaf = name.substr(lora + 1);
    std::string peft;
    if (module == "lm_head") {
      peft = "lm_head." + leaf;
    } else if (starts_with(module, layers)) {
      const size_t dot = module.find('.', layers.size());
      const std::string layer = "transformer.h." + module.substr(layers.size(), dot - layers.size()) + ".";
      const std::string rest = module.substr(dot + 1);
      if (rest == "self_attn.c_attn" || rest == "self_attn.q_proj" || rest == "self_attn.k_proj" ||
          rest == "self_attn.v_proj")
        peft = layer + "attn.c_attn." + leaf;
      else if (rest == "self_attn.o_proj") peft = layer + "attn.c_proj." + leaf;
      else if (rest == "mlp.up_proj") peft = layer + "mlp.c_fc." + leaf;
      else if (rest == "mlp.down_proj") peft = layer + "mlp.c_proj." + leaf;
    }
    if (peft.empty()) fail("GPT-2 adapter: '" + name + "' has no GPT-2 module");
    auto it = std::find_if(out.begin(), out.end(), [&](const Gpt2AdapterTensor& t) { return t.name == peft; });
    if (it == out.end()) {
      out.push_back({peft, shape, {name}});
    } else {  // q, k and v's rows of c_attn's lora_B
      it->shape[0] += shape[0];
      it->parts.push_back(name);
    }
  }
  return out;
}

std::string gpt2_prefix(const std::vector<std::string>& hf_names) {
  for (const std::string& n : hf_names)
    if (n == "transformer.wte.weight") return "transformer.";
  return "";
}

void check_gpt2_held_shapes(const ModelConfig& c, const HeldTensors& held, const std::string& where) {
  c.validate();
  const std::string prefix = gpt2_prefix(held.names), layers = prefix + "h.";
  int64_t found = 0;
  for (const std::string& name : held.names) {
    if (!starts_with(name, layers)) continue;
    const char* digits = name.c_str() + layers.size();
    char* end = nullptr;
    const long long n = std::strtoll(digits, &end, 10);
    if (end != digits && *end == '.' && n >= 0) found = std::max<int64_t>(found, n + 1);
  }
  if (found != c.num_hidden_layers)
    fail(where + ": the weights hold " + std::to_string(found) + " layers, the config gives n_layer = " +
         std::to_string(c.num_hidden_layers));
  for (const ParamShape& p : llama_param_shapes(c, LoraConfig{})) {
    const Gpt2Part part = gpt2_part(p.name, p.shape, c);
    const std::string name = prefix + part.hf_name;
    const auto shape = held.shape(name);
    if (!shape) fail(where + ": missing tensor '" + name + "'");
    if (*shape != part.hf_shape)
      fail(where + ": tensor '" + name + "' has shape " + shape_string(*shape) + ", the config gives " +
           shape_string(part.hf_shape));
  }
}

std::vector<float> read_gpt2_tensor(const Gpt2Part& part,
                                    const std::function<std::vector<float>(const std::string&)>& read_hf) {
  const std::vector<float> hf = read_hf(part.hf_name);
  if (!part.conv1d) {
    if (part.count == 0) return hf;
    return std::vector<float>(hf.begin() + part.first, hf.begin() + part.first + part.count);
  }
  // HF [in, out_total]; ours [rows, in], rows the outputs [first, first + rows).
  const int64_t in = part.hf_shape[0], out_total = part.hf_shape[1];
  const int64_t rows = part.count ? part.count : out_total;
  std::vector<float> ours(size_t(rows * in));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < in; ++i) ours[size_t(r * in + i)] = hf[size_t(i * out_total + part.first + r)];
  return ours;
}

std::vector<Gpt2HfTensor> gpt2_hf_tensors(const ModelConfig& c) {
  std::vector<Gpt2HfTensor> out;
  for (const ParamShape& p : llama_param_shapes(c, LoraConfig{})) {
    const Gpt2Part part = gpt2_part(p.name, p.shape, c);
    const std::string name = "transformer." + part.hf_name;
    if (out.empty() || out.back().name != name) {
      bool seen = false;
      for (const Gpt2HfTensor& t : out) seen = seen || t.name == name;
      if (!seen) out.push_back({name, part.hf_shape});
    }
  }
  return out;
}

std::vector<float> gpt2_hf_values(const std::string& hf_name, const ModelConfig& c,
                                  const std::function<std::vector<float>(const std::string&)>& ours) {
  const std::string bare = starts_with(hf_name, "transformer.") ? hf_name.substr(12) : hf_name;
  std::vector<float> hf;
  for (const ParamShape& p : llama_param_shapes(c, LoraConfig{})) {
    const Gpt2Part part = gpt2_part(p.name, p.shape, c);
    if (part.hf_name != bare) continue;
    if (hf.empty()) hf.resize(size_t(elements(part.hf_shape)));
    const std::vector<float> v = ours(p.name);
    if (!part.conv1d) {
      std::copy(v.begin(), v.end(), hf.begin() + part.first);
      continue;
    }
    const int64_t in = part.hf_shape[0], out_total = part.hf_shape[1];
    const int64_t rows = part.count ? part.count : out_total;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < in; ++i) hf[size_t(i * out_total + part.first + r)] = v[size_t(r * in + i)];
  }
  if (hf.empty()) fail("GPT-2 has no tensor '" + hf_name + "'");
  return hf;
}

}  // namespace mt
