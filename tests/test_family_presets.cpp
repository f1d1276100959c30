// The families' presets (io/family_presets.h): each one's tensors, counted as the model declares
// them (llama_param_shapes), equal a count by hand from its config.json, and round to the figure
// its model card publishes; `plan` and `shard` take them by name and count the same.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "io/family_presets.h"
#include "model/param_shapes.h"
#include "plan/model_shape.h"
#include "plan/plan_input.h"
#include "run_command.h"
#include "train/flops.h"

namespace mt {
namespace {

using testing::run_meshtrain;

int64_t declared_params(const ModelConfig& c) {
  int64_t n = 0;
  for (const auto& t : llama_param_shapes(c, LoraConfig{})) n += t.numel();
  return n;
}

// The count by hand, written from the HF modeling code rather than from meshtrain's list: per
// layer q [H·D, C], k and v [K·D, C], o [C, H·D], gate and up [I, C], down [C, I], two RMSNorms
// [C]; Qwen2's biases on q, k, v; Qwen3's q_norm and k_norm [D]; the embedding, the final norm,
// and an untied head.
int64_t hand_count(int64_t C, int64_t I, int64_t L, int64_t H, int64_t K, int64_t D, int64_t V, bool tied,
                   bool qkv_bias, bool qk_norm) {
  const int64_t q = H * D, kv = K * D;
  int64_t layer = q * C + 2 * kv * C + C * q + 3 * I * C + 2 * C;
  if (qkv_bias) layer += q + 2 * kv;
  if (qk_norm) layer += 2 * D;
  return V * C * (tied ? 1 : 2) + L * layer + C;
}

// The GPT shapes (GPT-2's block, written from modeling_gpt2.py): per layer ln_1 and ln_2 (weight
// and bias, 4h), c_attn [h, 3h] + 3h, attn c_proj [h, h] + h, c_fc [h, 4h] + 4h, mlp c_proj
// [4h, h] + h: 12h² + 13h; then wte [V, h] (the head, tied), wpe [P, h] and ln_f (2h).
int64_t gpt_hand_count(int64_t L, int64_t h, int64_t V, int64_t P) {
  return L * (12 * h * h + 13 * h) + (V + P) * h + 2 * h;
}

// A mixture of experts by hand (HF's MixtralSparseMoeBlock / Qwen3MoeSparseMoeBlock): per layer
// the attention and norms as above, a router [E, C] and E experts of gate and up [Ie, C] and down
// [C, Ie] in place of the MLP; every layer sparse (the four presets' configs). `active`: only k of
// the E experts counted (the model cards' "activated" parameters).
int64_t moe_hand_count(int64_t C, int64_t Ie, int64_t L, int64_t H, int64_t K, int64_t D, int64_t V, int64_t E,
                       int64_t k, bool qk_norm, bool active = false) {
  const int64_t q = H * D, kv = K * D;
  int64_t layer = q * C + 2 * kv * C + C * q + 2 * C + E * C + (active ? k : E) * 3 * Ie * C;
  if (qk_norm) layer += 2 * D;
  return 2 * V * C + L * layer + C;
}

struct Expected {
  int64_t params;  // the hand count of the config
  int64_t hand;
};

// The exact counts, and the same from hand_count with the config.json values typed out again.
const std::map<std::string, Expected>& expected() {
  static const std::map<std::string, Expected> e = {
      {"qwen2.5-0.5b", {494032768, hand_count(896, 4864, 24, 14, 2, 64, 151936, true, true, false)}},
      {"qwen2.5-7b", {7615616512, hand_count(3584, 18944, 28, 28, 4, 128, 152064, false, true, false)}},
      {"qwen2.5-72b", {72706203648, hand_count(8192, 29568, 80, 64, 8, 128, 152064, false, true, false)}},
      // 596,049,920: the figure PlanCli.ConfigJsonAlonePlansLikeItsDirectory reads from the real config.json.
      {"qwen3-0.6b", {596049920, hand_count(1024, 3072, 28, 16, 8, 128, 151936, true, false, true)}},
      {"qwen3-8b", {8190735360, hand_count(4096, 12288, 36, 32, 8, 128, 151936, false, false, true)}},
      {"qwen3-32b", {32762123264, hand_count(5120, 25600, 64, 64, 8, 128, 151936, false, false, true)}},
      {"mistral-7b", {7241732096, hand_count(4096, 14336, 32, 32, 8, 128, 32000, false, false, false)}},
      {"mistral-7b-v0.3", {7248023552, hand_count(4096, 14336, 32, 32, 8, 128, 32768, false, false, false)}},
      {"mistral-nemo-12b", {12247782400, hand_count(5120, 14336, 40, 32, 8, 128, 131072, false, false, false)}},
      // The mixtures of experts: 46,702,792,704 is MoeHf.ReadsMixtral8x7B's count of the published
      // config; the others are the hand counts of their configs (140.63B, 30.53B, 235.09B).
      {"mixtral-8x7b", {46702792704, moe_hand_count(4096, 14336, 32, 32, 8, 128, 32000, 8, 2, false)}},
      {"mixtral-8x22b", {140630071296, moe_hand_count(6144, 16384, 56, 48, 8, 128, 32768, 8, 2, false)}},
      {"qwen3-30b-a3b", {30532122624, moe_hand_count(2048, 768, 48, 32, 4, 128, 151936, 128, 8, true)}},
      {"qwen3-235b-a22b", {235093634560, moe_hand_count(4096, 1536, 94, 64, 4, 128, 151936, 128, 8, true)}},
      // GPT-2's 50257 tokens padded to 50688 (Megatron's rule at TP 4) and 2048 positions. The
      // paper's names round: 22.07B, 174.61B (GPT-3's 175.0B, Brown et al. 2020, is the same shape
      // at 50257 tokens: 174.60B, rounded up), 1008.03B.
      {"gpt-22b", {22071128064, gpt_hand_count(48, 6144, 50688, 2048)}},
      {"gpt-175b", {174609555456, gpt_hand_count(96, 12288, 50688, 2048)}},
      {"gpt-1t", {1008025651200, gpt_hand_count(128, 25600, 50688, 2048)}},
  };
  return e;
}

// "7.61B" (or "1T") against n: within one unit of the last digit printed (cards round, or cut:
// Qwen2.5-7B's 7,615,616,512 is printed 7.61B).
bool matches_published(int64_t n, const std::string& published) {
  EXPECT_TRUE(published.back() == 'B' || published.back() == 'T') << published;
  const double unit = published.back() == 'T' ? 1e12 : 1e9;
  const std::string digits = published.substr(0, published.size() - 1);
  const size_t dot = digits.find('.');
  const int decimals = dot == std::string::npos ? 0 : int(digits.size() - dot - 1);
  return std::abs(double(n) / unit - std::stod(digits)) < std::pow(10.0, -decimals);
}

TEST(FamilyPresets, ParameterCountsAreTheHandCountsAndThePublishedFigures) {
  ASSERT_EQ(family_presets().size(), expected().size());
  for (const auto& p : family_presets()) {
    SCOPED_TRACE(p.name);
    const auto it = expected().find(p.name);
    ASSERT_NE(it, expected().end());
    const int64_t n = declared_params(family_preset(p.name));
    EXPECT_EQ(n, it->second.params);
    EXPECT_EQ(n, it->second.hand);
    EXPECT_TRUE(matches_published(n, p.published)) << n << " vs " << p.published;
  }
}

// What each family brings, as parse_hf_config reads it from the preset's keys.
TEST(FamilyPresets, EachFamilysPartsComeFromItsConfig) {
  const ModelConfig q25 = family_preset("qwen2.5-7b");
  EXPECT_EQ(q25.model_type, "qwen2");
  EXPECT_TRUE(q25.qkv_bias);
  EXPECT_FALSE(q25.o_bias || q25.qk_norm || q25.tie_word_embeddings);
  EXPECT_TRUE(q25.layer_window.empty());  // use_sliding_window false
  EXPECT_TRUE(family_preset("qwen2.5-0.5b").tie_word_embeddings);

  const ModelConfig q3 = family_preset("qwen3-32b");
  EXPECT_TRUE(q3.qk_norm);
  EXPECT_FALSE(q3.qkv_bias);
  EXPECT_EQ(q3.head_dim(), 128);
  EXPECT_EQ(q3.q_dim(), 8192);  // 64 heads x 128, wider than hidden 5120
  EXPECT_EQ(q3.hidden_size, 5120);

  const ModelConfig m1 = family_preset("mistral-7b");
  ASSERT_EQ(m1.layer_window.size(), 32u);
  for (int64_t w : m1.layer_window) EXPECT_EQ(w, 4096);
  EXPECT_FLOAT_EQ(m1.rope_theta, 10000.0f);
  const ModelConfig m3 = family_preset("mistral-7b-v0.3");
  EXPECT_TRUE(m3.layer_window.empty());
  EXPECT_EQ(m3.vocab_size, 32768);
  EXPECT_FLOAT_EQ(m3.rope_theta, 1e6f);

  const ModelConfig nemo = family_preset("mistral-nemo-12b");
  EXPECT_EQ(nemo.q_dim(), 4096);
  EXPECT_EQ(nemo.hidden_size, 5120);
  EXPECT_EQ(nemo.head_dim(), 128);

  // The Frontier study's GPT: GPT-2's block at the study's sizes.
  const ModelConfig gpt = family_preset("gpt-175b");
  EXPECT_EQ(gpt.model_type, "gpt2");
  EXPECT_EQ(gpt.norm, ModelConfig::Norm::layer);
  EXPECT_EQ(gpt.mlp, ModelConfig::Mlp::gelu);
  EXPECT_EQ(gpt.positions, ModelConfig::Positions::learned);
  EXPECT_TRUE(gpt.qkv_bias && gpt.o_bias && gpt.mlp_bias && gpt.tie_word_embeddings);
  EXPECT_EQ(gpt.intermediate_size, 4 * 12288);
  EXPECT_EQ(gpt.num_key_value_heads, 96);
  EXPECT_EQ(gpt.vocab_size, 50688);
  EXPECT_EQ(gpt.vocab_size % (128 * 4), 0);  // Megatron's padding at TP 4
  EXPECT_EQ(gpt.max_position_embeddings, 2048);
  // Each preset's text is its family's keys with its own over them.
  const auto nemo_json = nlohmann::json::parse(family_preset_json("mistral-nemo-12b"));
  EXPECT_EQ(nemo_json.at("model_type"), "mistral");
  EXPECT_EQ(nemo_json.at("max_position_embeddings"), 1024000);
  EXPECT_EQ(nlohmann::json::parse(family_preset_json("mistral-7b")).at("max_position_embeddings"), 32768);

  EXPECT_THROW(family_preset("qwen9-1b"), Error);
  EXPECT_THROW(family_preset_json("qwen9-1b"), Error);
  EXPECT_THROW(published_preset("qwen9-1b"), Error);
  EXPECT_EQ(published_preset("llama3-8b").hidden_size, 4096);  // the Llama presets through the same door
}

// The mixtures of experts: their family's parts as parse_hf_config reads them, and the
// parameters a token uses (the planner's active_params, train/flops.h's matmul weights) against
// the hand count with k experts and the model cards' "activated" figures.
TEST(FamilyPresets, MixturesOfExpertsCountTheirActiveParameters) {
  struct Moe {
    const char* name;
    int64_t active;  // the hand count with k of E experts
  };
  const Moe moes[] = {
      {"mixtral-8x7b", moe_hand_count(4096, 14336, 32, 32, 8, 128, 32000, 8, 2, false, true)},     // 12.88B
      {"mixtral-8x22b", moe_hand_count(6144, 16384, 56, 48, 8, 128, 32768, 8, 2, false, true)},    // 39.16B
      {"qwen3-30b-a3b", moe_hand_count(2048, 768, 48, 32, 4, 128, 151936, 128, 8, true, true)},    // 3.35B
      {"qwen3-235b-a22b", moe_hand_count(4096, 1536, 94, 64, 4, 128, 151936, 128, 8, true, true)},  // 22.19B
  };
  EXPECT_EQ(moes[0].active, 12879925248);
  EXPECT_EQ(moes[1].active, 39161468928);
  EXPECT_EQ(moes[2].active, 3353032704);
  EXPECT_EQ(moes[3].active, 22190763520);
  for (const Moe& m : moes) {
    SCOPED_TRACE(m.name);
    const FamilyPreset* p = find_family_preset(m.name);
    ASSERT_NE(p, nullptr);
    const ModelConfig c = family_preset(m.name);
    EXPECT_TRUE(c.moe());
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) ASSERT_TRUE(c.moe_layer(l)) << l;
    EXPECT_TRUE(c.norm_topk_prob);
    EXPECT_FALSE(c.tie_word_embeddings);
    EXPECT_EQ(c.aux_loss_coef(), 0.0f);  // output_router_logits false, as published
    const plan::ModelShape shape = plan::model_preset(m.name);
    const int64_t active = plan::active_params(plan::model_parts(shape, LoraConfig{}), c, c.num_hidden_layers);
    EXPECT_EQ(active, m.active);
    EXPECT_TRUE(matches_published(active, p->published_active)) << active << " vs " << p->published_active;
    // train/flops.h counts a token's matmul weights: the active parameters less the embedding's
    // lookup table and the norms (two [C] a layer, Qwen3's q/k norms [D] twice, the final [C]).
    const int64_t C = c.hidden_size, D = c.head_dim();
    const int64_t norms = c.num_hidden_layers * (2 * C + (c.qk_norm ? 2 * D : 0)) + C;
    EXPECT_EQ(training_flops(c, LoraConfig{}, 4096).matmul_params, active - c.vocab_size * C - norms);
  }
  const ModelConfig mixtral = family_preset("mixtral-8x7b");
  EXPECT_EQ(mixtral.model_type, "mixtral");
  EXPECT_EQ(mixtral.num_experts, 8);
  EXPECT_EQ(mixtral.num_experts_per_tok, 2);
  EXPECT_EQ(mixtral.moe_intermediate_size, 14336);
  EXPECT_EQ(mixtral.max_position_embeddings, 32768);
  EXPECT_FLOAT_EQ(mixtral.rope_theta, 1e6f);
  EXPECT_FLOAT_EQ(mixtral.rms_norm_eps, 1e-5f);
  EXPECT_FALSE(mixtral.qk_norm);
  EXPECT_TRUE(mixtral.layer_window.empty());
  const ModelConfig m22 = family_preset("mixtral-8x22b");
  EXPECT_EQ(m22.hidden_size, 6144);
  EXPECT_EQ(m22.moe_intermediate_size, 16384);
  EXPECT_EQ(m22.num_hidden_layers, 56);
  EXPECT_EQ(m22.num_attention_heads, 48);
  EXPECT_EQ(m22.num_key_value_heads, 8);
  EXPECT_EQ(m22.vocab_size, 32768);
  EXPECT_EQ(m22.max_position_embeddings, 65536);
  const ModelConfig q30 = family_preset("qwen3-30b-a3b");
  EXPECT_EQ(q30.model_type, "qwen3_moe");
  EXPECT_TRUE(q30.qk_norm);
  EXPECT_EQ(q30.head_dim(), 128);
  EXPECT_EQ(q30.num_experts, 128);
  EXPECT_EQ(q30.num_experts_per_tok, 8);
  EXPECT_EQ(q30.moe_intermediate_size, 768);
  EXPECT_EQ(q30.intermediate_size, 6144);
  EXPECT_EQ(q30.max_position_embeddings, 40960);
  EXPECT_FLOAT_EQ(q30.rms_norm_eps, 1e-6f);
  const ModelConfig q235 = family_preset("qwen3-235b-a22b");
  EXPECT_EQ(q235.hidden_size, 4096);
  EXPECT_EQ(q235.moe_intermediate_size, 1536);
  EXPECT_EQ(q235.num_hidden_layers, 94);
  EXPECT_EQ(q235.num_attention_heads, 64);
  EXPECT_EQ(q235.num_key_value_heads, 4);
  EXPECT_EQ(q235.q_dim(), 8192);
}

// The planner's parts (embedding, one layer, the last stage) add up to the same count.
TEST(FamilyPresets, ThePlannerCountsTheSameTensors) {
  for (const auto& p : family_presets()) {
    const plan::ModelShape m = plan::model_preset(p.name);
    EXPECT_EQ(plan::total_params(plan::model_parts(m, LoraConfig{}), m.layers(), false),
              expected().at(p.name).params)
        << p.name;
  }
}

TEST(FamilyPresets, PlanTakesThemByNameAndListsThem) {
  auto r = run_meshtrain("plan --model qwen3-8b --cluster dgx-h100 --mesh fsdp=8 --seq 4096 --global-batch 64");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("parameters: 8190735360 base (8.19 B)"), std::string::npos) << r.output;
  r = run_meshtrain("plan --model mistral-nemo-12b --cluster dgx-h100 --mesh fsdp=8 --mode lora --json");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(r.output)["parameters"]["base"].get<int64_t>(), 12247782400);

  r = run_meshtrain("plan --list-models");
  ASSERT_EQ(r.code, 0) << r.output;
  for (const auto& p : family_presets()) {
    const std::string line = std::string(p.name) + " ";
    const size_t at = r.output.find("\n" + line);
    ASSERT_NE(at, std::string::npos) << p.name << "\n" << r.output;
    const std::string row = r.output.substr(at + 1, r.output.find('\n', at + 1) - at - 1);
    EXPECT_NE(row.find(std::to_string(expected().at(p.name).params)), std::string::npos) << row;
    EXPECT_NE(row.find(std::string("published ") + p.published + ", " + p.source), std::string::npos) << row;
  }
  EXPECT_NE(r.output.find("llama3-405b "), std::string::npos) << r.output;

  r = run_meshtrain("plan --model qwen9-1b --mesh dp=1");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("unknown model 'qwen9-1b'"), std::string::npos) << r.output;
}

// `plan` on a mixture of experts: total and active parameters, the experts' bytes per rank (split
// over fsdp like any tensor without ep; ep: test_moe_planner_ep.cpp), tp refused as the trainer
// refuses it and not searched.
TEST(FamilyPresets, PlanPricesAMixtureOfExperts) {
  auto r = run_meshtrain("plan --model qwen3-30b-a3b --cluster dgx-h100 --mesh fsdp=8 --seq 4096 --global-batch 64");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("parameters: 30532122624 base (30.53 B), 30532122624 trainable (30.53 B), "
                          "3353032704 active (3.35 B: 8 of 128 experts a token"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("experts: "), std::string::npos) << r.output;
  r = run_meshtrain("plan --model qwen3-30b-a3b --cluster dgx-h100 --mesh fsdp=8 --seq 4096 --global-batch 64 --json");
  ASSERT_EQ(r.code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["parameters"]["base"].get<int64_t>(), 30532122624);
  EXPECT_EQ(j["parameters"]["active"].get<int64_t>(), 3353032704);
  const double experts = 48.0 * 128 * 3 * 768 * 2048 * 2;  // bf16
  EXPECT_DOUBLE_EQ(j["experts"]["bytes_total"].get<double>(), experts);
  EXPECT_DOUBLE_EQ(j["experts"]["bytes_per_rank"].get<double>(), experts / 8);
  // QLoRA: the experts in NF4.
  r = run_meshtrain("plan --model qwen3-30b-a3b --cluster dgx-h100 --mesh fsdp=8 --mode lora --base-dtype nf4 --json");
  ASSERT_EQ(r.code, 0) << r.output;
  j = nlohmann::json::parse(r.output);
  EXPECT_NEAR(j["experts"]["bytes_per_rank"].get<double>(), experts / 2 / 8 * plan::kNf4BytesPerWeight, 1.0);

  // Expert tensor parallelism trains (tests/test_moe_mesh.cpp) and its pricing is measured
  // (tests/test_moe_planner.cpp, tp = 2), so a layout with tp plans and the search tries tp.
  r = run_meshtrain("plan --model qwen3-30b-a3b --cluster dgx-h100 --mesh fsdp=4,tp=2");
  EXPECT_EQ(r.code, 0) << r.output;

  r = run_meshtrain("plan --model mixtral-8x7b --cluster dgx-h100 --devices 8 --search --seq 4096 --global-batch 64 "
                    "--mode lora --json");
  ASSERT_EQ(r.code, 0) << r.output;
  j = nlohmann::json::parse(r.output);
  EXPECT_FALSE(j.contains("tp_skipped")) << r.output;  // tp is searched (MoePlannerEp.SearchTries...)
  ASSERT_FALSE(j["top"].empty()) << r.output;
}

// shard places the preset's own tensors: Qwen3's q/k norms and its 4096-wide q of 128-wide heads
// on Qwen3-8B, Qwen2.5's q/k/v biases, all summing to the exact count.
TEST(FamilyPresets, ShardPlacesThePresetsTensors) {
  for (const char* name : {"qwen3-8b", "qwen2.5-7b", "mistral-nemo-12b"}) {
    SCOPED_TRACE(name);
    const auto r = run_meshtrain(std::string("shard --json --preset ") + name + " --mesh fsdp=2,tp=2");
    ASSERT_EQ(r.code, 0) << r.output;
    const auto j = nlohmann::json::parse(r.output);
    const ModelConfig c = family_preset(name);
    int64_t total = 0;
    bool norms = false, biases = false;
    for (const auto& t : j["tensors"]) {
      int64_t n = 1;
      for (const auto& d : t["shape"]) n *= d.get<int64_t>();
      const std::string tname = t["name"];
      total += n;  // every layer's tensors are listed
      norms |= tname.find("self_attn.q_norm.weight") != std::string::npos;
      biases |= tname.find("self_attn.k_proj.bias") != std::string::npos;
      if (tname.find("self_attn.q_proj.weight") != std::string::npos) {
        EXPECT_EQ(t["shape"][0].get<int64_t>(), c.q_dim());
      }
    }
    EXPECT_EQ(total, expected().at(name).params);
    EXPECT_EQ(norms, c.qk_norm);
    EXPECT_EQ(biases, c.qkv_bias);
  }
  const auto bad = run_meshtrain("shard --preset mistral-7b --mesh dp=1 --set model.num_hidden_layers=2");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.output.find("--preset mistral-7b has a window per layer"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace mt
