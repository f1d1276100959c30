#include "io/peft.h"

#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "io/safetensors_write.h"

namespace mt {

std::string peft_module_name(const std::string& target) {
  return target == "lm_head" ? target : target + "_proj";
}

std::string peft_adapter_config_json(const LoraConfig& lora, const std::string& base_model) {
  nlohmann::ordered_json j;
  std::vector<std::string> modules;
  for (const auto& t : lora.targets) modules.push_back(peft_module_name(t));
  j["peft_type"] = "LORA";
  j["task_type"] = "CAUSAL_LM";
  j["base_model_name_or_path"] = base_model;
  j["r"] = lora.rank;
  j["lora_alpha"] = lora.alpha;
  j["lora_dropout"] = 0.0;
  j["target_modules"] = modules;
  j["bias"] = "none";
  j["fan_in_fan_out"] = false;
  j["inference_mode"] = true;
  j["init_lora_weights"] = true;
  j["use_rslora"] = false;
  j["use_dora"] = false;
  j["modules_to_save"] = nullptr;
  return j.dump(2) + "\n";
}

std::vector<std::string> save_peft_adapter(LlamaModel& model, const std::string& dir,
                                           const std::string& base_model) {
  std::vector<TensorOut> out;
  for (auto& p : model.adapters().params())
    out.push_back({"base_model.model." + p.name, "F32", p.shape, p.master, size_t(p.numel) * 4});
  const std::string weights = dir + "/adapter_model.safetensors";
  const std::string config = dir + "/adapter_config.json";
  write_safetensors(weights, out, {{"format", "pt"}});
  write_file_atomically(config, [&](std::ostream& os) {
    os << peft_adapter_config_json(model.lora_config(), base_model);
  });
  return {config, weights};
}

}  // namespace mt
