// config.json of each family meshtrain loads (docs/model-families.md): what each reads, what is
// refused in one line naming the key, and writing back what was read.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/hf_config.h"
#include "hf_config_fixtures.h"

namespace mt {
namespace {

using json = nlohmann::json;

// Published configs (unused keys included): Qwen2.5-7B-Instruct, Qwen3-0.6B (head_dim 128, not
// 1024 / 16), Mistral-7B-v0.1 (sliding_window 4096) and Mistral-Nemo (head_dim 128, not 5120 / 32).
const char* kQwen25_7B = R"({
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
  "eos_token_id": 151645, "hidden_act": "silu", "hidden_size": 3584, "initializer_range": 0.02,
  "intermediate_size": 18944, "max_position_embeddings": 32768, "max_window_layers": 28,
  "model_type": "qwen2", "num_attention_heads": 28, "num_hidden_layers": 28, "num_key_value_heads": 4,
  "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 131072, "tie_word_embeddings": false,
  "torch_dtype": "bfloat16", "transformers_version": "4.43.1", "use_cache": true,
  "use_sliding_window": false, "vocab_size": 152064})";
const char* kQwen3_06B = R"({
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
  "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
  "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
  "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
  "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null, "tie_word_embeddings": true,
  "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": true,
  "use_sliding_window": false, "vocab_size": 151936})";
const char* kMistral7B = R"({
  "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
  "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
  "max_position_embeddings": 32768, "model_type": "mistral", "num_attention_heads": 32,
  "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
  "sliding_window": 4096, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.34.0.dev0", "use_cache": true, "vocab_size": 32000})";
const char* kMistralNemo = R"({
  "architectures": ["MistralForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1,
  "eos_token_id": 2, "head_dim": 128, "hidden_act": "silu", "hidden_size": 5120,
  "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 1024000,
  "model_type": "mistral", "num_attention_heads": 32, "num_hidden_layers": 40, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "sliding_window": null, "tie_word_embeddings": false,
  "torch_dtype": "bfloat16", "transformers_version": "4.43.0.dev0", "use_cache": true, "vocab_size": 131072})";

using testing::config_with, testing::expect_config_error;

TEST(HfFamilies, ReadsQwen25) {
  const ModelConfig c = parse_hf_config(kQwen25_7B, "config.json");
  EXPECT_EQ(c.model_type, "qwen2");
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_FALSE(c.o_bias || c.mlp_bias || c.qk_norm);
  EXPECT_TRUE(c.layer_window.empty());  // use_sliding_window false
  EXPECT_EQ(c.head_dim(), 128);
  EXPECT_FLOAT_EQ(c.rope_theta, 1e6f);
  // With use_sliding_window: the layers from max_window_layers on; or those layer_types marks.
  ModelConfig w = parse_hf_config(config_with(kQwen25_7B, {{"use_sliding_window", true}, {"sliding_window", 4096},
                                                    {"max_window_layers", 20}}), "config.json");
  ASSERT_EQ(w.layer_window.size(), 28u);
  EXPECT_EQ(w.attention_window(19), 0);
  EXPECT_EQ(w.attention_window(20), 4096);
  EXPECT_EQ(w.attention_window(27), 4096);
  json types = json::array();
  for (int l = 0; l < 28; ++l) types.push_back(l % 2 ? "sliding_attention" : "full_attention");
  w = parse_hf_config(config_with(kQwen25_7B, {{"use_sliding_window", true}, {"layer_types", types}}), "config.json");
  EXPECT_EQ(w.attention_window(0), 0);
  EXPECT_EQ(w.attention_window(1), 131072);
  // Named by architectures alone.
  EXPECT_EQ(parse_hf_config(config_with(kQwen25_7B, {{"model_type", "<erase>"}}), "c").model_type, "qwen2");
}

TEST(HfFamilies, ReadsQwen3) {
  const ModelConfig c = parse_hf_config(kQwen3_06B, "config.json");
  EXPECT_EQ(c.model_type, "qwen3");
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.qkv_bias || c.o_bias || c.mlp_bias);
  EXPECT_EQ(c.head_dim(), 128);
  EXPECT_EQ(c.q_dim(), 2048);  // not hidden_size
  EXPECT_TRUE(c.tie_word_embeddings);
  const ModelConfig b = parse_hf_config(config_with(kQwen3_06B, {{"attention_bias", true}}), "config.json");
  EXPECT_TRUE(b.qkv_bias && b.o_bias);
}

TEST(HfFamilies, ReadsMistral) {
  const ModelConfig c = parse_hf_config(kMistral7B, "config.json");
  EXPECT_EQ(c.model_type, "mistral");
  ASSERT_EQ(c.layer_window.size(), 32u);
  for (int64_t l = 0; l < 32; ++l) EXPECT_EQ(c.attention_window(l), 4096);
  EXPECT_FALSE(c.qkv_bias || c.qk_norm);
  const ModelConfig nemo = parse_hf_config(kMistralNemo, "config.json");
  EXPECT_TRUE(nemo.layer_window.empty());
  EXPECT_EQ(nemo.head_dim(), 128);
  EXPECT_EQ(nemo.q_dim(), 4096);
}

TEST(HfFamilies, WhatAFamilyDoesNotComputeIsRefusedNamingTheKey) {
  expect_config_error(config_with(kQwen25_7B, {{"mlp_bias", true}}), "mlp_bias true is not supported for qwen2");
  expect_config_error(config_with(kQwen25_7B, {{"attention_bias", true}}), "attention_bias");
  expect_config_error(config_with(kMistral7B, {{"attention_bias", true}}), "attention_bias true is not supported for mistral");
  expect_config_error(config_with(kQwen3_06B, {{"mlp_bias", true}}), "mlp_bias");
  expect_config_error(config_with(kQwen3_06B, {{"hidden_act", "gelu"}}), "hidden_act \"gelu\"");
  expect_config_error(config_with(kQwen25_7B, {{"rope_scaling", {{"type", "yarn"}, {"factor", 4.0}}}}), "yarn");
  expect_config_error(config_with(kQwen3_06B, {{"rope_parameters", {{"rope_type", "default"}}}}), "rope_parameters");
  expect_config_error(config_with(kQwen3_06B, {{"attention_dropout", 0.1}}), "attention_dropout");
  expect_config_error(config_with(kMistral7B, {{"sliding_window", 0}}), "sliding_window");
  expect_config_error(config_with(kMistral7B, {{"layer_types", json::array()}}), "layer_types");
  expect_config_error(config_with(kQwen25_7B, {{"use_sliding_window", true}, {"layer_types", {"full_attention"}}}),
               "layer_types must be a list of num_hidden_layers");
  expect_config_error(config_with(kQwen3_06B, {{"head_dim", 7}}), "head_dim");
  expect_config_error(config_with(kQwen3_06B, {{"head_dim", 0}}), "head_dim");
  expect_config_error(config_with(kQwen3_06B, {{"model_type", "gemma3"}}), "model_type 'gemma3' is the multimodal");
  // (GPT2LMHeadModel loads since GPT-2 joined the families: test_gpt2_family.cpp.)
  expect_config_error(config_with(kQwen3_06B, {{"model_type", "<erase>"}, {"architectures", {"GPTNeoXForCausalLM"}}}),
               "architectures 'GPTNeoXForCausalLM' is not supported");
}

// Issue 34: layer_types was read only when a window was on, so with use_sliding_window false (every
// published Qwen2.5 / Qwen3) a list of the wrong length or unknown kinds passed unread.
TEST(HfFamilies, LayerTypesAreCheckedWhetherOrNotAWindowIsOn) {
  const json full27 = json(std::vector<std::string>(27, "full_attention"));
  const json full28 = json(std::vector<std::string>(28, "full_attention"));
  json unknown = full28;
  unknown[5] = "chunked_attention";
  for (const char* text : {kQwen25_7B, kQwen3_06B}) {
    expect_config_error(config_with(text, {{"layer_types", full27}}),
                        "must be a list of num_hidden_layers (28) entries, got 27");
    expect_config_error(config_with(text, {{"layer_types", "full_attention"}}),
                        "layer_types must be a list of num_hidden_layers (28) entries, got \"full_attention\"");
    expect_config_error(config_with(text, {{"layer_types", unknown}}),
                        "layer_types[5] \"chunked_attention\" is not supported (full_attention or sliding_attention)");
    // Sliding layers with the window off: transformers gives them full attention.
    json sliding = full28;
    sliding[3] = "sliding_attention";
    expect_config_error(config_with(text, {{"layer_types", sliding}}),
                        "layer_types marks sliding_attention layers, but use_sliding_window is false");
    expect_config_error(config_with(text, {{"layer_types", sliding}, {"use_sliding_window", true}, {"sliding_window", nullptr}}),
                        "layer_types marks sliding_attention layers, but sliding_window is null");
    // What transformers writes for a model without a window reads as before.
    EXPECT_TRUE(parse_hf_config(config_with(text, {{"layer_types", full28}}), "config.json").layer_window.empty());
  }
}

// transformers reads rope_scaling's rope_type before its older name, type: meshtrain did too, so a
// config whose two disagreed passed with one of them ignored.
TEST(HfFamilies, RopeScalingsTwoTypeNamesMustAgree) {
  const json llama3 = {{"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}};
  json both = llama3;
  both["rope_type"] = "llama3", both["type"] = "linear";
  expect_config_error(config_with(kQwen25_7B, {{"rope_scaling", both}}),
                      "rope_scaling rope_type \"llama3\" contradicts its type \"linear\"");
  both["type"] = "llama3";
  EXPECT_FLOAT_EQ(parse_hf_config(config_with(kQwen25_7B, {{"rope_scaling", both}}), "config.json").rope_scaling.factor,
                  8.0f);
}

TEST(HfFamilies, WritingGivesBackTheFamily) {
  for (const char* text : {kQwen25_7B, kQwen3_06B, kMistral7B, kMistralNemo}) {
    ModelConfig c = parse_hf_config(text, "config.json");
    if (c.model_type == "qwen2") c.layer_window = std::vector<int64_t>(28, 0), c.layer_window[27] = 512;
    // Without the source's keys: what meshtrain writes alone must load as the same model.
    for (const std::string& source : {std::string(), std::string(text)}) {
      const std::string written = hf_config_json(c, "bfloat16", source);
      const ModelConfig d = parse_hf_config(written, "written");
      EXPECT_EQ(d.model_type, c.model_type) << written;
      EXPECT_EQ(d.qkv_bias, c.qkv_bias) << written;
      EXPECT_EQ(d.o_bias, c.o_bias) << written;
      EXPECT_EQ(d.qk_norm, c.qk_norm) << written;
      EXPECT_EQ(d.head_dim(), c.head_dim()) << written;
      EXPECT_EQ(d.layer_window, c.layer_window) << written;
      EXPECT_EQ(json::parse(written)["architectures"], json::parse(text)["architectures"]) << written;
    }
  }
}

}  // namespace
}  // namespace mt
