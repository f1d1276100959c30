#include "io/model_files.h"

#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "io/safetensors_write.h"

namespace mt {

std::string hf_config_json(const LlamaConfig& c) {
  nlohmann::ordered_json j;
  j["architectures"] = {"LlamaForCausalLM"};
  j["model_type"] = "llama";
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["vocab_size"] = c.vocab_size;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["rope_theta"] = c.rope_theta;
  if (c.rope_scaling.factor > 0.0f)
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", c.rope_scaling.factor},
                         {"low_freq_factor", c.rope_scaling.low_freq_factor},
                         {"high_freq_factor", c.rope_scaling.high_freq_factor},
                         {"original_max_position_embeddings",
                          c.rope_scaling.original_max_position_embeddings}};
  else
    j["rope_scaling"] = nullptr;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["hidden_act"] = "silu";
  j["torch_dtype"] = "bfloat16";
  return j.dump(2) + "\n";
}

std::vector<std::string> save_base_model(LlamaModel& model, const std::string& dir) {
  const bool bf = model.precision() == Precision::bf16;
  std::vector<Buffer<bf16>> converted;  // bf16 copies of tensors that only have f32 values
  std::vector<TensorOut> out;
  for (auto& p : model.base().params()) {
    TensorOut t{p.name, bf ? "BF16" : "F32", p.shape, nullptr, 0};
    if (!bf) {
      t.data = p.master, t.bytes = size_t(p.numel) * 4;
    } else if (p.compute && !p.master) {
      t.data = p.compute, t.bytes = size_t(p.numel) * 2;
    } else {
      converted.emplace_back(size_t(p.numel));
      convert(converted.back().data(), p.master, size_t(p.numel));
      t.data = converted.back().data(), t.bytes = size_t(p.numel) * 2;
    }
    out.push_back(t);
  }
  std::string weights = dir + "/model.safetensors", config = dir + "/config.json";
  write_safetensors(weights, out, {{"format", "pt"}});
  write_file_atomically(config, [&](std::ostream& os) { os << hf_config_json(model.config()); });
  return {config, weights};
}

std::string save_adapters(LlamaModel& model, const std::string& dir) {
  std::vector<TensorOut> out;
  for (auto& p : model.adapters().params())
    out.push_back({p.name, "F32", p.shape, p.master, size_t(p.numel) * 4});
  std::string path = dir + "/adapter.safetensors";
  write_safetensors(path, out, {{"format", "pt"}});
  return path;
}

}  // namespace mt
