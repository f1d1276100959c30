// meshtrain plan as a user runs it: a report, JSON, an SVG; bad input gives one line and a
// non-zero exit.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <sys/wait.h>

#include "temp_dirs.h"

namespace {

struct Result {
  int code;
  std::string output;
};

Result run_plan(const std::string& args) {
  std::string cmd = std::string(MESHTRAIN_BINARY) + " plan " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

void expect_one_line_error(const std::string& args, const std::string& must_name) {
  Result r = run_plan(args);
  EXPECT_NE(r.code, 0) << args;
  EXPECT_NE(r.output.find(must_name), std::string::npos) << args << "\n" << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << args << "\n" << r.output;
}

const std::string kSeed =
    "--model llama3-405b --cluster mi300x-node --devices 8 --mesh fsdp=8 --mode lora --lora-rank 8 "
    "--lora-targets q,k,v,o,gate,up,down,lm_head --seq 64 --global-batch 16 --micro-batch 2";

TEST(PlanCli, SeedReportAndJson) {
  Result r = run_plan(kSeed);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("fits"), std::string::npos);
  EXPECT_NE(r.output.find("tokens/s"), std::string::npos);
  Result j = run_plan(kSeed + " --json");
  ASSERT_EQ(j.code, 0) << j.output;
  auto doc = nlohmann::json::parse(j.output);
  EXPECT_TRUE(doc["memory_bytes"]["fits"].get<bool>());
  EXPECT_GT(doc["throughput"]["tokens_per_s"].get<double>(), 0.0);
}

// The parameter counts the plan priced, checked against the published sizes: Llama 3 8B has
// 8,030,261,248 parameters, and PEFT reports 20,971,520 trainable for r=8 on all seven
// projections (and 3,407,872 for q,v only).
TEST(PlanCli, ReportsBaseAndTrainableParameters) {
  Result r = run_plan("--model llama3-8b --mesh dp=1");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("parameters: 8030261248 base (8.03 B), 8030261248 trainable (8.03 B)"), std::string::npos)
      << r.output;
  r = run_plan("--model llama3-8b --mesh dp=1 --mode lora --lora-rank 8");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("parameters: 8030261248 base (8.03 B), 20971520 trainable (20.97 M, LoRA adapters)"),
            std::string::npos)
      << r.output;
  r = run_plan("--model llama3-8b --mesh dp=1 --mode lora --lora-rank 8 --lora-targets q,v --json");
  ASSERT_EQ(r.code, 0) << r.output;
  auto doc = nlohmann::json::parse(r.output);
  EXPECT_EQ(doc["parameters"]["base"].get<int64_t>(), 8030261248);
  EXPECT_EQ(doc["parameters"]["trainable"].get<int64_t>(), 3407872);
  r = run_plan("--model llama3-8b --cluster dgx-h100 --devices 8 --search --global-batch 64 --top 1");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("parameters: 8030261248 base"), std::string::npos) << r.output;
}

// QLoRA as a user asks it: the base's bytes in NF4 and whether 2 x MI300X holds it.
TEST(PlanCli, Nf4BaseWeightsAndFit) {
  const std::string run = "--model llama3-405b --cluster mi300x-node --devices 2 --mesh fsdp=2 --mode lora "
                          "--seq 1024 --global-batch 8 --checkpointing --base-dtype ";
  Result r = run_plan(run + "nf4");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("llama3-405b, lora r=8 [q,k,v,o,gate,up,down], nf4 base"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("base weights: 215.71 GB (nf4: layer matrices at 4.1289 bits, embedding, head and "
                          "norms bf16)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("  fits\n"), std::string::npos) << r.output;
  r = run_plan(run + "bf16");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("base weights: 811.71 GB (bf16)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("DOES NOT FIT"), std::string::npos) << r.output;
  Result j = run_plan(run + "nf4 --json");
  ASSERT_EQ(j.code, 0) << j.output;
  auto doc = nlohmann::json::parse(j.output);
  EXPECT_EQ(doc["base_dtype"].get<std::string>(), "nf4");
  EXPECT_NEAR(doc["base_weight_bytes"].get<double>(), 215708794880.0, 1.0);
  expect_one_line_error("--model llama3-8b --mesh dp=1 --base-dtype nf4", "nf4 base needs LoRA");
  expect_one_line_error("--model llama3-8b --mesh dp=1 --mode lora --base-dtype nf8", "bf16 or nf4, got 'nf8'");
}

TEST(PlanCli, SearchJsonAndSvg) {
  const std::string svg = mt::testing::fresh_temp_dir("plan_front") + "/front.svg";
  Result r = run_plan("--model llama3-8b --cluster dgx-h100 --devices 8 --search --global-batch 64 "
                      "--seq 2048 --json --top 3 --svg " + svg);
  ASSERT_EQ(r.code, 0) << r.output;
  auto doc = nlohmann::json::parse(r.output);
  EXPECT_EQ(doc["top"].size(), 3u);
  EXPECT_TRUE(std::filesystem::exists(svg));
}

// A model's config.json alone plans as its directory does (the planner reads no weights), and a
// family's config (Qwen3: q/k norms, head_dim 128 over 16 heads of a 1024 hidden) counts its tensors.
TEST(PlanCli, ConfigJsonAlonePlansLikeItsDirectory) {
  const std::string dir = mt::testing::fresh_temp_dir("plan_config_json");
  std::filesystem::create_directories(dir + "/qwen3-0.6b");
  const std::string config = dir + "/qwen3-0.6b/config.json";
  std::ofstream(config) << R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
    "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28,
    "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
    "max_position_embeddings": 40960, "rms_norm_eps": 1e-06, "rope_theta": 1000000,
    "tie_word_embeddings": true, "hidden_act": "silu", "attention_bias": false})";
  Result r = run_plan("--model " + config + " --mesh dp=1 --json");
  ASSERT_EQ(r.code, 0) << r.output;
  // Qwen3-0.6B as published: 596,049,920 parameters with the tied embedding counted once.
  EXPECT_NE(r.output.find("596049920"), std::string::npos) << r.output;
}

TEST(PlanCli, BadInputIsOneLine) {
  expect_one_line_error("--model llama9-1b --mesh dp=1", "unknown model 'llama9-1b'");
  expect_one_line_error("--model llama3-8b --cluster tpu --mesh dp=1", "unknown cluster 'tpu'");
  expect_one_line_error("--model llama3-8b --devices 8 --mesh dp=3", "has 3 ranks but --devices is 8");
  expect_one_line_error("--model llama3-8b --mesh tp=3 --global-batch 3", "not divisible by tp=3");
  expect_one_line_error("--model llama3-8b --mesh dp=1 --seq 0", "sequence length must be > 0");
  expect_one_line_error("--model llama3-8b --mesh dp=1 --micro-batch -2", "micro-batch must be > 0");
  expect_one_line_error("--model llama3-8b --search --devices 0", "--search needs --devices");
}

// Under pp the plan shows each stage's units and memory and the bubble fraction, in JSON for scripts.
TEST(PlanCli, PipelineStagesAndBubbleInJson) {
  Result r = run_plan("--model llama3-8b --mesh pp=4 --global-batch 8 --json");
  ASSERT_EQ(r.code, 0) << r.output;
  auto doc = nlohmann::json::parse(r.output);
  const auto& p = doc["pipeline"];
  EXPECT_EQ(p["schedule"], "1f1b");
  EXPECT_DOUBLE_EQ(p["bubble_fraction"].get<double>(), 3.0 / (8 + 3));
  ASSERT_EQ(p["stages"].size(), 4u);
  int64_t blocks = 0;
  double largest = 0;
  for (const auto& s : p["stages"]) {
    blocks += s["blocks"].get<int64_t>();
    largest = std::max(largest, s["memory_bytes"]["total"].get<double>());
  }
  EXPECT_EQ(blocks, 32);
  const int64_t first_blocks = p["stages"][0]["blocks"].get<int64_t>();
  EXPECT_EQ(p["stages"][0]["units"], "embedding, blocks 0-" + std::to_string(first_blocks - 1));
  EXPECT_DOUBLE_EQ(doc["memory_bytes"]["total"].get<double>(), largest);  // the peak is the busiest stage
  // GPipe's last stage keeps 8 gradients and an input, 1F1B's 3 (an input, 2 gradients), each a
  // residual stream in bf16 (the default precision); the activations are one micro-batch's under
  // both.
  Result g = run_plan("--model llama3-8b --mesh pp=4 --global-batch 8 --json --pp-schedule gpipe --pp-blocks 8,8,8,8");
  ASSERT_EQ(g.code, 0) << g.output;
  auto gdoc = nlohmann::json::parse(g.output);
  EXPECT_EQ(gdoc["pipeline"]["blocks"], nlohmann::json::array({8, 8, 8, 8}));
  const auto& gitems = gdoc["pipeline"]["stages"][3]["memory_bytes"]["items"];
  const auto& items = p["stages"][3]["memory_bytes"]["items"];
  EXPECT_DOUBLE_EQ(gitems["pipeline buffers"].get<double>(), 9 * 2048 * 4096 * 2.0);
  EXPECT_DOUBLE_EQ(items["pipeline buffers"].get<double>(), 3 * 2048 * 4096 * 2.0);
  // The same split under 1F1B: the activations are the stage's own 8 blocks' either way.
  Result same = run_plan("--model llama3-8b --mesh pp=4 --global-batch 8 --json --pp-blocks 8,8,8,8");
  ASSERT_EQ(same.code, 0) << same.output;
  const auto sdoc = nlohmann::json::parse(same.output);
  const auto& sitems = sdoc["pipeline"]["stages"][3]["memory_bytes"]["items"];
  EXPECT_DOUBLE_EQ(gitems["activations"].get<double>(), sitems["activations"].get<double>());
  // Interleaved: 2 chunks per stage, blocks per chunk, bubble (p-1)/(v m+p-1).
  Result v = run_plan("--model llama3-8b --mesh pp=4 --global-batch 8 --json --pp-virtual 2");
  ASSERT_EQ(v.code, 0) << v.output;
  auto vdoc = nlohmann::json::parse(v.output);
  EXPECT_EQ(vdoc["pipeline"]["virtual"], 2);
  EXPECT_EQ(vdoc["pipeline"]["blocks"].size(), 8u);
  EXPECT_DOUBLE_EQ(vdoc["pipeline"]["bubble_fraction"].get<double>(), 3.0 / (2 * 8 + 3));
  EXPECT_NE(vdoc["pipeline"]["stages"][0]["units"].get<std::string>().find("; "), std::string::npos);
  expect_one_line_error("--model llama3-8b --mesh pp=4 --global-batch 6 --pp-virtual 2",
                        "to be a multiple of mesh pp");
  Result text = run_plan("--model llama3-8b --mesh pp=4 --global-batch 8");
  EXPECT_NE(text.output.find("pipeline: 4 stages, 1f1b"), std::string::npos) << text.output;
  expect_one_line_error("--model llama3-8b --mesh pp=4 --pp-blocks 8,8", "gives 2 stages but the mesh has pp=4");
}

}  // namespace
