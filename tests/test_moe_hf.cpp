// Mixture-of-experts models as Hugging Face ships them (io/hf_moe.h): the published config.json of
// Mixtral-8x7B-v0.1, Qwen3-30B-A3B and OLMoE-1B-7B read as they are, written back with their keys, the MoE
// types meshtrain does not compute refused in one line naming what is missing, and PEFT's module
// names for Mixtral's experts (w1, w3, w2) written and read.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "hf_config_fixtures.h"
#include "io/hf_config.h"
#include "io/peft.h"
#include "io/peft_config.h"
#include "model/param_shapes.h"

namespace mt::testing {
namespace {

// Mixtral-8x7B-v0.1's config.json (transformers 4.36).
const char* kMixtral8x7B = R"({
  "architectures": ["MixtralForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1,
  "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
  "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mixtral",
  "num_attention_heads": 32, "num_experts_per_tok": 2, "num_hidden_layers": 32,
  "num_key_value_heads": 8, "num_local_experts": 8, "output_router_logits": false,
  "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.02,
  "sliding_window": null, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.36.0.dev0", "use_cache": true, "vocab_size": 32000})";

// Qwen3-30B-A3B's config.json (transformers 4.51).
const char* kQwen3_30B_A3B = R"({
  "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128,
  "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 6144,
  "max_position_embeddings": 40960, "max_window_layers": 48, "mlp_only_layers": [],
  "model_type": "qwen3_moe", "moe_intermediate_size": 768, "norm_topk_prob": true,
  "num_attention_heads": 32, "num_experts": 128, "num_experts_per_tok": 8, "num_hidden_layers": 48,
  "num_key_value_heads": 4, "output_router_logits": false, "rms_norm_eps": 1e-06,
  "rope_scaling": null, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001,
  "sliding_window": null, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.51.0", "use_cache": true, "use_sliding_window": false,
  "vocab_size": 151936})";

// OLMoE-1B-7B-0924's config.json (transformers 4.43).
const char* kOlmoe1B7B = R"({
  "architectures": ["OlmoeForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "clip_qkv": null, "eos_token_id": 50279, "hidden_act": "silu", "hidden_size": 2048,
  "initializer_range": 0.02, "intermediate_size": 1024, "max_position_embeddings": 4096,
  "model_type": "olmoe", "norm_topk_prob": false, "num_attention_heads": 16, "num_experts": 64,
  "num_experts_per_tok": 8, "num_hidden_layers": 16, "num_key_value_heads": 16,
  "output_router_logits": false, "pad_token_id": 1, "rms_norm_eps": 1e-05, "rope_scaling": null,
  "rope_theta": 10000.0, "router_aux_loss_coef": 0.01, "tie_word_embeddings": false,
  "torch_dtype": "bfloat16", "transformers_version": "4.43.0.dev0", "use_cache": true,
  "vocab_size": 50304})";

TEST(MoeHf, ReadsOlmoe1B7B) {
  const ModelConfig c = parse_hf_config(kOlmoe1B7B, "config.json");
  EXPECT_EQ(c.model_type, "olmoe");
  EXPECT_EQ(c.num_experts, 64);
  EXPECT_EQ(c.num_experts_per_tok, 8);
  EXPECT_EQ(c.moe_intermediate_size, 1024);
  EXPECT_FALSE(c.norm_topk_prob);
  EXPECT_TRUE(c.qk_norm && c.qk_norm_whole);
  EXPECT_EQ(c.q_norm_width(), 2048);
  int64_t n = 0;  // 6.92B in all, as published ("7B")
  for (const ParamShape& p : llama_param_shapes(c, LoraConfig{})) n += p.numel();
  EXPECT_EQ(n, 6919161856);
  expect_config_error(config_with(kOlmoe1B7B, {{"clip_qkv", 8.0}}), "clip_qkv");
}

TEST(MoeHf, ReadsMixtral8x7B) {
  const ModelConfig c = parse_hf_config(kMixtral8x7B, "config.json");
  EXPECT_EQ(c.model_type, "mixtral");
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_EQ(c.num_experts_per_tok, 2);
  EXPECT_EQ(c.moe_intermediate_size, 14336);  // the experts are intermediate_size wide
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_FALSE(c.output_router_logits);
  EXPECT_FLOAT_EQ(c.router_aux_loss_coef, 0.02f);
  EXPECT_EQ(c.aux_loss_coef(), 0.0f);  // not added to the loss, as transformers with this config
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) EXPECT_TRUE(c.moe_layer(l)) << l;
  // 46.7B parameters, as published.
  int64_t n = 0;
  for (const ParamShape& p : llama_param_shapes(c, LoraConfig{})) n += p.numel();
  EXPECT_EQ(n, 46702792704);
}

TEST(MoeHf, ReadsQwen3_30B_A3B) {
  const ModelConfig c = parse_hf_config(kQwen3_30B_A3B, "config.json");
  EXPECT_EQ(c.model_type, "qwen3_moe");
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.head_dim(), 128);
  EXPECT_EQ(c.num_experts, 128);
  EXPECT_EQ(c.num_experts_per_tok, 8);
  EXPECT_EQ(c.moe_intermediate_size, 768);
  EXPECT_TRUE(c.norm_topk_prob);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) EXPECT_TRUE(c.moe_layer(l)) << l;
  int64_t n = 0;  // 30.5B in all (the model card's figure)
  for (const ParamShape& p : llama_param_shapes(c, LoraConfig{})) n += p.numel();
  EXPECT_NEAR(double(n), 30.5e9, 0.05e9);
  // Dense layers where mlp_only_layers and decoder_sparse_step say.
  const ModelConfig mixed = parse_hf_config(
      config_with(kQwen3_30B_A3B, {{"mlp_only_layers", {0, 5}}, {"decoder_sparse_step", 2}}), "config.json");
  EXPECT_FALSE(mixed.moe_layer(0));  // (0 + 1) % 2 != 0 anyway
  EXPECT_TRUE(mixed.moe_layer(1));
  EXPECT_FALSE(mixed.moe_layer(5));  // listed
  EXPECT_TRUE(mixed.moe_layer(3));
  EXPECT_FALSE(mixed.moe_layer(4));
}

TEST(MoeHf, WritingGivesBackTheExperts) {
  for (const char* text : {kMixtral8x7B, kQwen3_30B_A3B, kOlmoe1B7B}) {
    const ModelConfig c = parse_hf_config(text, "config.json");
    const std::string written = hf_config_json(c, "bfloat16");
    const ModelConfig back = parse_hf_config(written, "written config.json");
    EXPECT_EQ(back.model_type, c.model_type);
    EXPECT_EQ(back.num_experts, c.num_experts);
    EXPECT_EQ(back.num_experts_per_tok, c.num_experts_per_tok);
    EXPECT_EQ(back.moe_intermediate_size, c.moe_intermediate_size);
    EXPECT_EQ(back.norm_topk_prob, c.norm_topk_prob);
    EXPECT_EQ(back.router_aux_loss_coef, c.router_aux_loss_coef);
    EXPECT_EQ(back.qk_norm_whole, c.qk_norm_whole);
    const auto j = nlohmann::json::parse(written);
    EXPECT_EQ(j.contains("num_local_experts"), c.model_type == "mixtral") << written;
    if (c.model_type == "qwen3_moe") {
      EXPECT_EQ(j["router_aux_loss_coef"].dump(), "0.001");
    }
  }
}

TEST(MoeHf, WhatIsNotComputedIsRefusedNamingIt) {
  expect_config_error(config_with(kQwen3_30B_A3B, {{"model_type", "qwen2_moe"}}), "shared expert");
  expect_config_error(config_with(kQwen3_30B_A3B, {{"model_type", "deepseek_v3"}}), "multi-head latent attention");
  expect_config_error(config_with(kMixtral8x7B, {{"router_jitter_noise", 0.1}}), "router_jitter_noise");
  expect_config_error(config_with(kMixtral8x7B, {{"num_local_experts", "<erase>"}}), "num_local_experts");
  expect_config_error(config_with(kQwen3_30B_A3B, {{"num_experts_per_tok", 129}}), "num_experts_per_tok");
  expect_config_error(config_with(kQwen3_30B_A3B, {{"mlp_only_layers", {48}}}), "mlp_only_layers");
  expect_config_error(config_with(kQwen3_30B_A3B, {{"shared_expert_intermediate_size", 1024}}), "shared expert");
}

TEST(MoeHf, PeftNamesMixtralsExpertsAsItsModules) {
  LoraConfig lora;
  lora.enabled = true;
  lora.targets = {"q", "v", "gate", "up", "down"};
  const auto j = nlohmann::json::parse(peft_adapter_config_json(lora, "base", /*mixtral_experts=*/true));
  EXPECT_EQ(j["target_modules"], nlohmann::json({"q_proj", "v_proj", "w1", "w3", "w2"}));
  // And back: w1 / w3 / w2 are the MLP's roles.
  const LoraConfig back = parse_peft_config(j.dump(), "adapter_config.json");
  EXPECT_EQ(back.targets, (std::vector<std::string>{"q", "v", "gate", "up", "down"}));
}

}  // namespace
}  // namespace mt::testing
