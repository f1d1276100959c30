// Gemma 3 (model_type gemma3_text, Gemma3ForCausalLM; docs/model-families.md, "Gemma 3"): its
// config.json read into the one block's description (published 1B and 27B text configs), the keys
// refused in one line, writing back what was read, and a tiny Gemma 3 directory with the Gemma 3
// tokenizer fixture trained through the binary (full, LoRA, QLoRA) and exported.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/normal_init.h"
#include "io/hf_config.h"
#include "io/model_files.h"
#include "mesh_runs.h"
#include "model/transformer.h"
#include "model/param_shapes.h"
#include "model/presets.h"
#include "temp_dirs.h"
#include "hf_config_fixtures.h"

namespace mt::testing {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// google/gemma-3-1b-it's config.json, and the text_config of google/gemma-3-27b-it written as a
// gemma3_text config (the keys its text model reads).
const char* kGemma3_1B = R"({
  "architectures": ["Gemma3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "attn_logit_softcapping": null, "bos_token_id": 2, "cache_implementation": "hybrid",
  "eos_token_id": [1, 106], "final_logit_softcapping": null, "head_dim": 256,
  "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 1152, "initializer_range": 0.02,
  "intermediate_size": 6912, "max_position_embeddings": 32768, "model_type": "gemma3_text",
  "num_attention_heads": 4, "num_hidden_layers": 26, "num_key_value_heads": 1, "pad_token_id": 0,
  "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000,
  "rope_scaling": null, "rope_theta": 1000000, "sliding_window": 512, "sliding_window_pattern": 6,
  "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0", "use_cache": true,
  "vocab_size": 262144})";
const char* kGemma3_27B_text = R"({
  "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "head_dim": 128,
  "hidden_size": 5376, "intermediate_size": 21504, "num_attention_heads": 32, "num_hidden_layers": 62,
  "num_key_value_heads": 16, "query_pre_attn_scalar": 168, "max_position_embeddings": 131072,
  "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "sliding_window": 1024,
  "vocab_size": 262208, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
  "rope_local_base_freq": 10000.0, "final_logit_softcapping": null, "attn_logit_softcapping": null})";


int64_t parameters(const ModelConfig& c) {
  int64_t n = 0;
  for (const ParamShape& p : llama_param_shapes(c, LoraConfig{})) n += p.numel();
  return n;
}

TEST(Gemma3Config, ReadsThe1B) {
  const ModelConfig c = parse_hf_config(kGemma3_1B, "config.json");
  EXPECT_EQ(c.model_type, "gemma3_text");
  EXPECT_TRUE(c.qk_norm && c.post_norms && c.geglu && c.scale_embeddings && c.tie_word_embeddings);
  EXPECT_FALSE(c.qkv_bias || c.o_bias || c.mlp_bias);
  EXPECT_EQ(c.norm_weight_offset, 1.0f);
  EXPECT_EQ(c.head_dim(), 256);
  EXPECT_EQ(c.q_dim(), 1024);                // 4 heads of 256: not hidden_size
  EXPECT_FLOAT_EQ(c.attention_scale, 1.0f / 16.0f);  // 256^-1/2
  EXPECT_FLOAT_EQ(c.rope_theta, 1e6f);
  EXPECT_FLOAT_EQ(c.rope_local_theta, 1e4f);
  EXPECT_EQ(c.rope_scaling.factor, 0.0f);
  // sliding_window_pattern 6: layers 5, 11, 17, 23 global, the others a window of 512.
  ASSERT_EQ(c.layer_window.size(), 26u);
  for (int64_t l = 0; l < 26; ++l) {
    EXPECT_EQ(c.attention_window(l), (l + 1) % 6 == 0 ? 0 : 512) << l;
    EXPECT_EQ(c.local_rope(l), (l + 1) % 6 != 0) << l;
  }
  // Four norms per layer and q/k norms, tied head: about 1.0 billion parameters ("1B").
  const auto shapes = llama_param_shapes(c, LoraConfig{});
  auto has = [&](const std::string& name) {
    return std::any_of(shapes.begin(), shapes.end(), [&](const ParamShape& p) { return p.name == name; });
  };
  for (const char* norm : {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                           "post_feedforward_layernorm"})
    EXPECT_TRUE(has(std::string("model.layers.25.") + norm + ".weight")) << norm;
  EXPECT_TRUE(has("model.layers.0.self_attn.q_norm.weight"));
  EXPECT_FALSE(has("lm_head.weight"));
  const int64_t n = parameters(c);
  EXPECT_GT(n, 995'000'000);
  EXPECT_LT(n, 1'005'000'000);
}

TEST(Gemma3Config, ReadsThe27BText) {
  const ModelConfig c = parse_hf_config(kGemma3_27B_text, "config.json");
  EXPECT_EQ(c.head_dim(), 128);
  EXPECT_FLOAT_EQ(c.attention_scale, float(1.0 / std::sqrt(168.0)));  // not 128^-1/2
  EXPECT_TRUE(c.rope_scaling.linear);
  EXPECT_FLOAT_EQ(c.rope_scaling.factor, 8.0f);
  EXPECT_EQ(c.attention_window(0), 1024);
  EXPECT_EQ(c.attention_window(5), 0);
  EXPECT_TRUE(c.tie_word_embeddings);  // Gemma's default when the key is absent
  // The text decoder of Gemma 3 27B: 27.0 billion parameters (DESIGN.md's published figure).
  EXPECT_NEAR(double(parameters(c)) / 1e9, 27.0, 0.05);
  // layer_types, when given, decides instead of the pattern.
  json types = json::array();
  for (int l = 0; l < 62; ++l) types.push_back(l == 3 ? "full_attention" : "sliding_attention");
  const ModelConfig t = parse_hf_config(config_with(kGemma3_27B_text, {{"layer_types", types}}), "config.json");
  EXPECT_EQ(t.attention_window(3), 0);
  EXPECT_EQ(t.attention_window(5), 1024);
}

TEST(Gemma3Config, WhatMeshtrainDoesNotComputeIsRefusedNamingTheKey) {
  expect_config_error(config_with(kGemma3_1B, {{"final_logit_softcapping", 30.0}}), "final_logit_softcapping 30.0 is not supported");
  expect_config_error(config_with(kGemma3_1B, {{"attn_logit_softcapping", 50.0}}), "attn_logit_softcapping 50.0 is not supported");
  expect_config_error(config_with(kGemma3_1B, {{"use_bidirectional_attention", true}}), "use_bidirectional_attention");
  expect_config_error(config_with(kGemma3_1B, {{"hidden_activation", "gelu"}}), "hidden_activation \"gelu\" is not supported");
  expect_config_error(config_with(kGemma3_1B, {{"hidden_act", "silu"}}), "hidden_act \"silu\" is not supported for gemma3_text");
  expect_config_error(config_with(kGemma3_1B, {{"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}}}),
               "rope_scaling type 'yarn' is not supported (linear or default only)");
  expect_config_error(config_with(kGemma3_1B, {{"sliding_window", nullptr}}), "sliding_window null");
  expect_config_error(config_with(kGemma3_1B, {{"layer_types", {"full_attention"}}}), "layer_types must be a list of num_hidden_layers");
  expect_config_error(config_with(kGemma3_1B, {{"query_pre_attn_scalar", 0}}), "query_pre_attn_scalar must be > 0");
  expect_config_error(config_with(kGemma3_1B, {{"mlp_bias", true}}), "mlp_bias true is not supported for gemma3_text");
  expect_config_error(config_with(kGemma3_1B, {{"model_type", "gemma3"}}), "model_type 'gemma3' is the multimodal");
  // Linear scaling is Gemma's; a llama config with it is still refused.
  expect_config_error(R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
                   "num_attention_heads": 4, "vocab_size": 32, "max_position_embeddings": 64,
                   "rope_scaling": {"rope_type": "linear", "factor": 2.0}})",
               "rope_scaling type 'linear' is not supported (llama3 or default only)");
}

TEST(Gemma3Config, WritingGivesBackTheModel) {
  for (const char* text : {kGemma3_1B, kGemma3_27B_text}) {
    const ModelConfig c = parse_hf_config(text, "config.json");
    for (const std::string& source : {std::string(), std::string(text)}) {
      const std::string written = hf_config_json(c, "bfloat16", source);
      const json j = json::parse(written);
      EXPECT_EQ(j["architectures"], json({"Gemma3ForCausalLM"})) << written;
      EXPECT_FALSE(j.contains("hidden_act")) << written;
      EXPECT_EQ(j["hidden_activation"], "gelu_pytorch_tanh") << written;
      const ModelConfig d = parse_hf_config(written, "written");
      EXPECT_EQ(d.model_type, "gemma3_text");
      EXPECT_EQ(d.head_dim(), c.head_dim());
      EXPECT_EQ(d.attention_scale, c.attention_scale);
      EXPECT_EQ(d.layer_window, c.layer_window);
      EXPECT_EQ(d.rope_local_theta, c.rope_local_theta);
      EXPECT_EQ(d.rope_scaling.factor, c.rope_scaling.factor);
      EXPECT_EQ(d.rope_scaling.linear, c.rope_scaling.linear);
      EXPECT_EQ(d.tie_word_embeddings, c.tie_word_embeddings);
      EXPECT_TRUE(d.post_norms && d.geglu && d.scale_embeddings && d.qk_norm);
    }
  }
}

// The planner's presets: the same model as the published configs, and the published sizes. Gemma
// 3's model cards give 1B, and 4.3B / 12.2B / 27.4B for the multimodal 4B / 12B / 27B, whose
// vision tower (SigLIP, about 0.42B) is not part of the text decoder these presets describe;
// DESIGN.md gives 27.0B for the 27B's text part.
TEST(Gemma3Config, PresetsAreThePublishedModels) {
  for (const auto& [name, text] : {std::pair{"gemma3-1b", kGemma3_1B}, std::pair{"gemma3-27b", kGemma3_27B_text}}) {
    const ModelConfig p = llama_preset(name), c = parse_hf_config(text, "config.json");
    EXPECT_EQ(llama_param_shapes(p, LoraConfig{}).size(), llama_param_shapes(c, LoraConfig{}).size()) << name;
    EXPECT_EQ(parameters(p), parameters(c)) << name;
    EXPECT_EQ(p.model_type, c.model_type) << name;
    EXPECT_EQ(p.attention_scale, c.attention_scale) << name;
    EXPECT_EQ(p.layer_window, c.layer_window) << name;
    EXPECT_EQ(p.rope_scaling.factor, c.rope_scaling.factor) << name;
    EXPECT_EQ(p.rope_scaling.linear, c.rope_scaling.linear) << name;
    EXPECT_EQ(p.rope_local_theta, c.rope_local_theta) << name;
    EXPECT_TRUE(p.post_norms && p.geglu && p.scale_embeddings && p.qk_norm && p.norm_weight_offset == 1.0f) << name;
  }
  const double vision = 0.42;  // billions, the multimodal releases' vision tower
  EXPECT_NEAR(double(parameters(llama_preset("gemma3-1b"))) / 1e9, 1.0, 0.005);
  EXPECT_NEAR(double(parameters(llama_preset("gemma3-4b"))) / 1e9 + vision, 4.3, 0.05);
  EXPECT_NEAR(double(parameters(llama_preset("gemma3-12b"))) / 1e9 + vision, 12.2, 0.05);
  EXPECT_NEAR(double(parameters(llama_preset("gemma3-27b"))) / 1e9, 27.0, 0.05);
  EXPECT_NEAR(double(parameters(llama_preset("gemma3-27b"))) / 1e9 + vision, 27.4, 0.05);
  // `shard --preset` keeps the family's parts through its TOML round trip; `plan --model` counts alike.
  const CommandResult shard = run_meshtrain("shard --preset gemma3-1b --mesh dp=1");
  EXPECT_NE(shard.output.find(std::to_string(parameters(llama_preset("gemma3-1b"))) + " parameters"), std::string::npos)
      << shard.output;
  EXPECT_NE(shard.output.find("pre_feedforward_layernorm"), std::string::npos) << shard.output;
  const CommandResult plan = run_meshtrain("plan --model gemma3-27b --cluster cpu --devices 1 --mesh dp=1");
  EXPECT_NE(plan.output.find("parameters: " + std::to_string(parameters(llama_preset("gemma3-27b"))) + " base"),
            std::string::npos)
      << plan.output;
}

// ---- through the binary ---------------------------------------------------------------------------

const std::string kShared = std::string(MESHTRAIN_SOURCE_DIR) + "/../shared/data/";
const std::string kGemmaTokenizer =
    std::string(MESHTRAIN_SOURCE_DIR) + "/tests/data/hf_families/gemma_synthetic/tokenizer.json";

// A tiny random Gemma 3 in its HF layout with the synthetic Gemma 3 tokenizer (723 tokens): two
// sliding layers (window 8 < seq_len) and a global one, query_pre_attn_scalar != head_dim.
std::string tiny_gemma3_dir(const std::string& name) {
  const std::string dir = fresh_temp_dir(name);
  json cfg = json::parse(kGemma3_1B);
  cfg["hidden_size"] = 64, cfg["intermediate_size"] = 96, cfg["num_hidden_layers"] = 3;
  cfg["num_attention_heads"] = 4, cfg["num_key_value_heads"] = 2, cfg["head_dim"] = 24;
  cfg["query_pre_attn_scalar"] = 20, cfg["sliding_window"] = 8, cfg["sliding_window_pattern"] = 3;
  cfg["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 4.0}};
  cfg["vocab_size"] = 723, cfg["max_position_embeddings"] = 256, cfg["eos_token_id"] = 1;
  fs::create_directories(dir + "/source");  // the config's other keys (ids, dtype) are kept from here
  std::ofstream(dir + "/source/config.json") << cfg.dump(2);
  const ModelConfig c = load_hf_config(dir + "/source/config.json");
  Transformer m(c, Precision::fp32, LoraConfig{});
  m.init_weights(3);
  std::vector<float> v;
  for (Param& p : m.base().params()) {  // norm weights away from 0 (1 + w is applied), so they matter
    if (p.shape.size() != 1) continue;
    v.resize(size_t(p.numel));
    fill_normal(v.data(), p.numel, 0.3f, 4, p.name);
    m.base().set_values(p, v.data());
  }
  save_base_model(m, dir + "/model", ModelOrigin{dir + "/source", {}});
  fs::copy(kGemmaTokenizer, dir + "/model/tokenizer.json");
  return dir + "/model";
}

// The first 16 KiB of tinyshakespeare: the Gemma pre-tokenizer makes all of a text one BPE word,
// slow to encode for the whole megabyte.
std::string shakespeare_excerpt(const std::string& dir) {
  std::ifstream in(kShared + "text/tinyshakespeare.txt", std::ios::binary);
  std::string text(16384, '\0');
  in.read(text.data(), std::streamsize(text.size()));
  text.resize(size_t(in.gcount()));
  std::ofstream(dir + "/excerpt.txt", std::ios::binary) << text;
  return dir + "/excerpt.txt";
}

std::string gemma_train(const std::string& model, const std::string& data, const std::string& out,
                        const std::string& extra) {
  return std::string(MESHTRAIN_BINARY) + " train --set model.path=" + model + " --set data.path=" + data +
         " --set train.steps=16 --set train.batch_size=2 --set train.seq_len=32 "
         "--set train.log_every=1 --set train.peak_gflops=100 --set optim.warmup_steps=0 --set output.dir=" + out + " " +
         extra;
}

TEST(Gemma3Run, TrainsFullLoraAndQloraThroughTheBinary) {
  const std::string model = tiny_gemma3_dir("gemma3_run_model");
  const std::string data = shakespeare_excerpt(fs::path(model).parent_path().string());
  const std::string lora = "--set lora.enabled=true --set lora.rank=4 --set optim.lr=1e-2 "
                           "--set 'lora.targets=[\"q\",\"k\",\"v\",\"o\",\"gate\",\"up\",\"down\"]' ";
  struct Case {
    const char* name;
    std::string extra;
  };
  for (const Case& k : {Case{"full", "--set optim.lr=1e-2"}, Case{"lora", lora},
                        Case{"qlora", lora + "--set lora.base_dtype=nf4"}}) {
    SCOPED_TRACE(k.name);
    const std::string out = fresh_temp_dir(std::string("gemma3_run_") + k.name);
    std::string log;
    ASSERT_EQ(run(gemma_train(model, data, out, k.extra), &log), 0) << log;
    const std::vector<double> loss = losses(out);
    ASSERT_EQ(loss.size(), 16u) << log;
    const double first = (loss[0] + loss[1] + loss[2] + loss[3]) / 4, last = (loss[12] + loss[13] + loss[14] + loss[15]) / 4;
    EXPECT_LT(last, first) << log;  // it learns (means of four steps: each step reads other text)
    std::printf("%s: loss %.3f (first four steps) -> %.3f (last four)\n", k.name, first, last);
    if (std::string(k.name) == "lora") {  // merged into the base, the model evaluates as base + adapter
      std::string export_log;
      ASSERT_EQ(run(std::string(MESHTRAIN_BINARY) + " export -m " + model + " --adapter " + out + "/adapter --merged " +
                        out + "/merged",
                    &export_log),
                0)
          << export_log;
      EXPECT_EQ(json::parse(std::ifstream(out + "/merged/config.json"))["model_type"], "gemma3_text");
      std::ofstream(out + "/eval.txt") << "First Citizen:\nBefore we proceed any further, hear me speak.\n";
      auto mean_loss = [&](const std::string& model_args) {
        std::string eval_log;
        EXPECT_EQ(run(std::string(MESHTRAIN_BINARY) + " eval " + model_args + " --data " + out +
                          "/eval.txt --seq-len 32 --batch 2",
                      &eval_log),
                  0)
            << eval_log;
        const size_t at = eval_log.find("mean loss ");
        return at == std::string::npos ? -1.0 : std::stod(eval_log.substr(at + 10));
      };
      const double with_adapter = mean_loss("-m " + model + " --adapter " + out + "/adapter");
      const double merged = mean_loss("-m " + out + "/merged");
      EXPECT_GT(with_adapter, 0.0);
      EXPECT_NEAR(merged, with_adapter, 1e-4 * with_adapter);
    }
    if (std::string(k.name) == "full") {
      const json written = json::parse(std::ifstream(out + "/model/config.json"));
      EXPECT_EQ(written["model_type"], "gemma3_text");
      EXPECT_EQ(written["query_pre_attn_scalar"], 20);
      EXPECT_EQ(written["layer_types"], json({"sliding_attention", "sliding_attention", "full_attention"}));
      const std::vector<float> w = weights(out + "/model/model.safetensors");
      EXPECT_FALSE(w.empty());
      // The trained directory loads and evaluates as the same family.
      std::ofstream(out + "/eval.txt") << "First Citizen:\nBefore we proceed any further, hear me speak.\n";
      std::string eval_log;
      EXPECT_EQ(run(std::string(MESHTRAIN_BINARY) + " eval --model " + out + "/model --data " + out +
                        "/eval.txt --seq-len 32 --batch 2",
                    &eval_log),
                0)
          << eval_log;
      EXPECT_NE(eval_log.find("mean loss"), std::string::npos) << eval_log;
    }
  }
}

}  // namespace
}  // namespace mt::testing
