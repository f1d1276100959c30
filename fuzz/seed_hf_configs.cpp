// Writes the seed corpus for fuzz_hf_configs into the directory given as argv[1]: config.json
// files from the real writer (with and without llama3 rope scaling, with GQA) and PEFT
// adapter_config.json files as peft's save_pretrained writes them.
#include <fstream>
#include <string>

#include "io/hf_config.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const std::string dir = argv[1];
  mt::ModelConfig c;
  std::ofstream(dir + "/config.json") << mt::hf_config_json(c, "bfloat16");
  c.rope_scaling = {8.0f, 1.0f, 4.0f, 8192};
  c.tie_word_embeddings = true;
  std::ofstream(dir + "/config_llama3.json") << mt::hf_config_json(c, "bfloat16");
  std::ofstream(dir + "/config_min.json")
      << R"({"hidden_size": 64, "intermediate_size": 172, "num_hidden_layers": 1,
             "num_attention_heads": 4, "vocab_size": 32, "max_position_embeddings": 128,
             "head_dim": 16, "model_type": "llama", "rope_scaling": null})";
  std::ofstream(dir + "/adapter_config.json")
      << R"({"base_model_name_or_path": "base", "bias": "none", "fan_in_fan_out": false,
             "inference_mode": true, "lora_alpha": 16, "lora_dropout": 0.0, "peft_type": "LORA",
             "r": 8, "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"],
             "task_type": "CAUSAL_LM", "use_dora": false, "use_rslora": true})";
  std::ofstream(dir + "/adapter_one.json")
      << R"({"peft_type": "LORA", "r": 2, "lora_alpha": 4.5, "target_modules": "down_proj"})";
  // Hostile shapes for the bounded reader (core/bounded_json.h): nesting far past its limit, and
  // a large shallow file; each must be refused (or read) in time and memory linear in its size.
  std::ofstream(dir + "/deep.json") << std::string(1 << 16, '[');
  std::ofstream(dir + "/deep_in_key.json") << R"({"hidden_size": )" << std::string(4096, '[');
  std::string wide = R"({"model_type": "llama", "extra": [)";
  for (int i = 0; i < 20000; ++i) wide += "0,";
  std::ofstream(dir + "/wide.json") << wide << "0]}";
  return 0;
}
