#include "io/peft.h"

#include <algorithm>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "io/gpt2_layout.h"
#include "io/peft_names.h"
#include "io/safetensors_write.h"

namespace mt {

std::string peft_module_name(const std::string& target, bool mixtral_experts) {
  if (mixtral_experts && (target == "gate" || target == "up" || target == "down"))
    return target == "gate" ? "w1" : target == "up" ? "w3" : "w2";
  const bool whole_name = target == "lm_head" || target == "c_attn" || target == "c_proj" || target == "c_fc";
  return whole_name ? target : target + "_proj";
}

std::string peft_adapter_config_json(const LoraConfig& lora, const std::string& base_model,
                                     bool mixtral_experts) {
  nlohmann::ordered_json j;
  std::vector<std::string> modules;
  for (const auto& t : lora.targets) modules.push_back(peft_module_name(t, mixtral_experts));
  j["peft_type"] = "LORA";
  j["task_type"] = "CAUSAL_LM";
  j["base_model_name_or_path"] = base_model;
  j["r"] = lora.rank;
  j["lora_alpha"] = lora.alpha;
  j["lora_dropout"] = 0.0;
  j["target_modules"] = modules;
  j["bias"] = "none";
  // GPT-2's modules are Conv1D, whose weight PEFT reads transposed ([in, out]) when it merges.
  j["fan_in_fan_out"] = gpt2_lora_targets(lora.targets);
  j["inference_mode"] = true;
  j["init_lora_weights"] = true;
  j["use_rslora"] = lora.rank_stabilized;
  j["use_dora"] = false;
  // A trained router (lora.train_router) is PEFT's modules_to_save: "gate" matches each MoE
  // layer's router module (mlp.gate, Mixtral's block_sparse_moe.gate) by the end of its name, and
  // no other module (gate_proj, w1 end otherwise).
  // A grown vocabulary's embedding and head (lora.train_embeddings) are modules_to_save too; a
  // tied head is listed and saved as well, since PEFT's copy of the embedding would not tie.
  std::vector<std::string> saved;
  if (lora.train_router) saved.push_back("gate");
  if (lora.train_embeddings) saved.insert(saved.end(), {"embed_tokens", "lm_head"});
  if (!saved.empty()) j["modules_to_save"] = saved;
  else j["modules_to_save"] = nullptr;
  return j.dump(2) + "\n";
}

namespace {

// GPT-2's adapter under PEFT's module names (io/gpt2_layout.h): c_attn's lora_B stacked from q, k
// and v's rows.
void as_gpt2_peft(std::vector<ExportTensor>& adapters, FetchValues& fetch) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> ours;
  for (const auto& a : adapters) ours.push_back({a.name, a.shape});
  const std::vector<Gpt2AdapterTensor> peft = gpt2_peft_tensors(ours);
  adapters.clear();
  for (const auto& t : peft) adapters.push_back({t.name, t.shape});
  fetch = [peft, ours_fetch = fetch](const std::string& name) {
    std::vector<float> v;
    for (const auto& t : peft)
      if (t.name == name)
        for (const std::string& part : t.parts) {
          const std::vector<float> rows = ours_fetch(part);
          v.insert(v.end(), rows.begin(), rows.end());
        }
    return v;
  };
}

}  // namespace

std::vector<std::string> save_peft_adapter(const LoraConfig& lora, const std::vector<ExportTensor>& ours,
                                           const FetchValues& ours_fetch, const std::string& dir,
                                           const std::string& base_model) {
  std::vector<ExportTensor> adapters = ours;
  FetchValues fetch = ours_fetch;
  if (gpt2_lora_targets(lora.targets)) as_gpt2_peft(adapters, fetch);
  // A tied head trained through the embedding's copy: PEFT's lm_head copy gets the same values.
  const auto has = [&](const char* name) {
    return std::any_of(adapters.begin(), adapters.end(), [&](const ExportTensor& a) { return a.name == name; });
  };
  if (lora.train_embeddings && has(kEmbedCopyName) && !has(kHeadCopyName)) {
    for (const auto& a : ours)
      if (a.name == kEmbedCopyName) adapters.push_back({kHeadCopyName, a.shape});
    fetch = [inner = fetch](const std::string& name) { return inner(name == kHeadCopyName ? kEmbedCopyName : name); };
  }
  std::vector<TensorOut> specs;
  for (const auto& a : adapters) {
    int64_t n = 1;
    for (int64_t d : a.shape) n *= d;
    specs.push_back({file_tensor_name(kPeftPrefix, a.name), "F32", a.shape, nullptr, size_t(n) * 4});
  }
  const std::string weights = dir + "/adapter_model.safetensors";
  const std::string config = dir + "/adapter_config.json";
  write_safetensors_streamed(weights, specs, [&](size_t i) {
    const std::vector<float> v = fetch(adapters[i].name);
    std::vector<char> bytes(v.size() * 4);
    std::memcpy(bytes.data(), v.data(), bytes.size());
    return bytes;
  }, {{"format", "pt"}});
  // Mixtral's experts are w1 / w3 / w2 (its layers have no gate_proj): its adapters say which.
  bool mixtral = false;
  for (const auto& a : adapters) mixtral = mixtral || a.name.find(".block_sparse_moe.experts.") != std::string::npos;
  write_file_atomically(config, [&](std::ostream& os) { os << peft_adapter_config_json(lora, base_model, mixtral); });
  return {config, weights};
}

std::vector<std::string> save_peft_adapter(Transformer& model, const std::string& dir,
                                           const std::string& base_model) {
  std::vector<ExportTensor> adapters;
  for (const auto& p : model.adapters().params()) adapters.push_back({p.name, p.shape});
  return save_peft_adapter(model.lora_config(), adapters, [&](const std::string& name) {
    const Param& p = model.adapters().get(name);
    std::vector<float> values(size_t(p.numel));
    model.adapters().get_values(p, values.data());
    return values;
  }, dir, base_model);
}

}  // namespace mt
