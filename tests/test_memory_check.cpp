// Memory before allocation (issue 14, item 3, and the export case of item 5): a config that
// disagrees with its weights, sizes no 64-bit count can hold, and a run larger than the machine
// are refused with one line before anything is allocated. Each CLI run is bounded by `timeout`, so
// a regression (the old code sized and zeroed the whole model first, or grew until it was killed)
// fails with exit 124 instead of hanging the suite.
#include <gtest/gtest.h>

#include <algorithm>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/available_memory.h"
#include "core/error.h"
#include "io/model_files.h"
#include "io/peft.h"
#include "io/weight_shapes.h"
#include "model_fixtures.h"
#include "plan/run_memory.h"
#include "run_command.h"
#include "train/checkpoint_manifest.h"
#include "train/metrics.h"
#include "train/run_config.h"
#include "temp_dirs.h"

namespace mt {
namespace {

namespace fs = std::filesystem;
using Result = testing::CommandResult;

// `env meshtrain args`, killed after 60 s: exit 124 means it was still running.
Result run_bounded(const std::string& args, const std::string& env = "") {
  return testing::run_command(env + " timeout -k 5 60 " + std::string(MESHTRAIN_BINARY) + " " + args);
}

// Refused at once: non-zero exit, one line, naming `must_name`.
void expect_refused(const std::string& args, const std::string& must_name, const std::string& env = "") {
  const Result r = run_bounded(args, env);
  ASSERT_NE(r.code, 124) << args << ": still running after 60 s";
  EXPECT_NE(r.code, 0) << args;
  EXPECT_NE(r.output.find(must_name), std::string::npos) << args << "\n" << r.output;
  size_t lines = 0;
  for (char c : r.output) lines += c == '\n';
  EXPECT_EQ(lines, 1u) << args << "\n" << r.output;
}

// An HF model directory of a tiny model with `layers` layers.
std::string saved_model(const std::string& name, int64_t layers) {
  ModelConfig c = testing::tiny_config();
  c.num_hidden_layers = layers;
  Transformer m(c, Precision::fp32, LoraConfig{});
  m.init_weights(5);
  const std::string dir = testing::fresh_temp_dir(name);
  save_base_model(m, dir);
  return dir;
}

// Rewrites keys of <dir>/config.json, as a hand-edited or corrupt file would have them.
void set_config_keys(const std::string& dir, const nlohmann::json& keys) {
  const std::string path = dir + "/config.json";
  nlohmann::json j = nlohmann::json::parse(std::ifstream(path));
  j.update(keys);
  std::ofstream(path) << j.dump(2);
}

// Every verb that builds a model from a directory, on `dir`.
void expect_every_loader_refuses(const std::string& dir, const std::string& must_name) {
  expect_refused("generate -m " + dir + " -n 1", must_name);
  expect_refused("eval -m " + dir + " -d " + dir + "/config.json", must_name);
  expect_refused("export -m " + dir + " --merged " + dir + "_merged", must_name);
  // A run config naming the model (the built-in run's [model] keys cannot go with model.path).
  const std::string run_toml = dir + "_run.toml";
  std::ofstream(run_toml) << "[model]\npath = " << nlohmann::json(dir).dump() << "\n[train]\nsteps = 1\n"
                          << "[output]\ndir = " << nlohmann::json(dir + "_run").dump() << "\n";
  expect_refused("train --config " + run_toml, must_name);
}

TEST(MemoryCheck, BillionLayersInConfigAreRefusedBeforeAllocating) {
  const std::string dir = saved_model("mem_layers", 2);
  set_config_keys(dir, {{"num_hidden_layers", 1000000000}});
  expect_every_loader_refuses(dir, "num_hidden_layers");
}

TEST(MemoryCheck, HugeHiddenSizeIsRefusedNamingTheKey) {
  const std::string dir = saved_model("mem_hidden", 2);
  set_config_keys(dir, {{"hidden_size", 1000000000000LL}});
  expect_every_loader_refuses(dir, "hidden_size");
  // Within 64-bit counts but not what the weights hold: the headers say so before allocation.
  set_config_keys(dir, {{"hidden_size", 4000000}, {"num_attention_heads", 4}});
  expect_every_loader_refuses(dir, "model.embed_tokens.weight");
}

TEST(MemoryCheck, LayerCountDisagreeingWithTheWeightsIsRefused) {
  const std::string dir = saved_model("mem_3_of_5", 5);
  set_config_keys(dir, {{"num_hidden_layers", 3}});  // used to load layers 0-2 and drop 3-4 silently
  expect_every_loader_refuses(dir, "the weights hold 5 layers, the config gives num_hidden_layers = 3");
}

TEST(MemoryCheck, ExportWithTrillionContextGivesOneLine) {
  const std::string dir = saved_model("mem_context", 2);
  set_config_keys(dir, {{"max_position_embeddings", 1000000000000LL}});
  // (--no-tokenizer: the saved model has none, which a GGUF export otherwise refuses first.)
  expect_refused("export -m " + dir + " --gguf " + dir + ".gguf --no-tokenizer", "max_position_embeddings");
  expect_refused("export -m " + dir + " --merged " + dir + "_merged", "max_position_embeddings");
}

TEST(MemoryCheck, AdapterDisagreeingWithItsConfigIsRefused) {
  LoraConfig lora;
  lora.enabled = true, lora.rank = 2, lora.targets = {"q", "v"};
  Transformer m(testing::tiny_config(), Precision::fp32, lora);
  m.init_weights(5);
  const std::string base = testing::fresh_temp_dir("mem_adapter_base"), adapter = testing::fresh_temp_dir("mem_adapter");
  save_base_model(m, base);
  save_peft_adapter(m, adapter, base);
  const std::string path = adapter + "/adapter_config.json";
  nlohmann::json j = nlohmann::json::parse(std::ifstream(path));
  j["r"] = 1000000000;  // the file holds rank 2
  std::ofstream(path) << j.dump(2);
  expect_refused("generate -m " + base + " --adapter " + adapter + " -n 1", "lora_A.weight");
}

// The default (tiny) run with train.batch_size=3000 needs several GiB of activations; it used to
// grow until the kernel killed it. MESHTRAIN_MEMORY_LIMIT stands in for the machine's available
// memory so the outcome does not depend on this machine; the figure is the planner's.
TEST(MemoryCheck, BatchTooLargeForTheMemoryIsRefusedWithTheFigure) {
  const std::string overrides = "--set train.batch_size=3000";
  const RunConfig cfg = parse_run_config(default_run_config_toml(), {"train.batch_size=3000"});
  const double usable = plan::kUsableMemoryFraction * 4.0 * (1 << 30);
  const plan::MemoryBreakdown need = plan::peak_memory(plan::run_plan_input(cfg, cfg.model, usable));
  ASSERT_GT(need.total, usable);  // the case is meant not to fit in 4 GiB
  const std::string figure = "train needs " + format_bytes(int64_t(need.total)) + " per rank (activations ";
  expect_refused("train " + overrides, figure, "MESHTRAIN_MEMORY_LIMIT=4G");
  expect_refused("train " + overrides, "4.00 GiB", "MESHTRAIN_MEMORY_LIMIT=4G");
  expect_refused("train " + overrides, "lower train.batch_size", "MESHTRAIN_MEMORY_LIMIT=4G");
  // Activation checkpointing is the other way out, until it is on.
  const Result r = run_bounded("train " + overrides + " --set train.activation_checkpointing=true",
                               "MESHTRAIN_MEMORY_LIMIT=1G");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("lower train.batch_size or train.seq_len;"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("activation_checkpointing"), std::string::npos) << r.output;
}

// Issue 24, item 6. Was: an address-space limit (ulimit -v) was not seen by the check, so under
// `prlimit --as` the same run passed it and ended in a bare "out of memory" (or std::bad_alloc)
// at its first large allocation. Now the room under the limit caps the figure and the check
// refuses in one line naming it.
TEST(MemoryCheck, AddressSpaceLimitIsSeen) {
  if (testing::run_command("prlimit --version").code != 0) GTEST_SKIP() << "prlimit (util-linux) not installed";
  const std::string limit = "prlimit --as=" + std::to_string(int64_t(3) << 30) + " ";
  const std::string cmd = limit + "env OMP_NUM_THREADS=1 timeout -k 5 60 " + std::string(MESHTRAIN_BINARY) +
                          " train --set train.batch_size=3000 --set output.dir=" +
                          testing::fresh_temp_dir("rlimit_as") + "/run";
  const Result r = testing::run_command(cmd);
  ASSERT_NE(r.code, 124) << r.output;
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("address-space limit (ulimit -v)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("lower train.batch_size"), std::string::npos) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
}

// lora.base_dtype = "nf4" prices the frozen base's layer matrices at NF4's 4.13 bits in the
// check train makes; outside LoRA the key changes nothing (a base that trains is not quantised).
TEST(MemoryCheck, Nf4BaseIsPricedInFourBits) {
  const RunConfig lora = parse_run_config(default_run_config_toml(), {"lora.enabled=true"});
  const RunConfig qlora = parse_run_config(default_run_config_toml(), {"lora.enabled=true", "lora.base_dtype=\"nf4\""});
  const auto weights = [](const RunConfig& c) {
    return plan::peak_memory(plan::run_plan_input(c, c.model, 1e12)).item("weights");
  };
  EXPECT_EQ(plan::run_plan_input(qlora, qlora.model, 1e12).base_dtype, plan::BaseDtype::nf4);
  EXPECT_LT(weights(qlora), 0.6 * weights(lora));
  // A quantised base is a frozen one: without LoRA the config is refused before any pricing.
  EXPECT_THROW(parse_run_config(default_run_config_toml(), {"lora.base_dtype=\"nf4\""}), Error);
}

TEST(MemoryCheck, RanksOnOneHostShareItsMemory) {
  // The built-in run needs well under 90% of 1 GiB, but more than a 64th of it.
  const std::string args = "train --set train.steps=1 --set train.peak_gflops=100 --set output.dir=" +
                           testing::fresh_temp_dir("mem_shared");
  expect_refused(args, "shared by 64 ranks on this host", "MESHTRAIN_MEMORY_LIMIT=1G OMPI_COMM_WORLD_LOCAL_SIZE=64");
  const Result alone = run_bounded(args, "MESHTRAIN_MEMORY_LIMIT=1G");
  EXPECT_EQ(alone.code, 0) << alone.output;
}

TEST(MemoryCheck, CanBeSkippedByThoseWhoKnowBetter) {
  const std::string args = "train --set train.steps=1 --set train.peak_gflops=100 --set output.dir=" +
                           testing::fresh_temp_dir("mem_skip");
  expect_refused(args, "MESHTRAIN_MEMORY_CHECK=off", "MESHTRAIN_MEMORY_LIMIT=1M");
  const Result r = run_bounded(args, "MESHTRAIN_MEMORY_LIMIT=1M MESHTRAIN_MEMORY_CHECK=off");
  EXPECT_EQ(r.code, 0) << r.output;
  expect_refused(args, "MESHTRAIN_MEMORY_CHECK", "MESHTRAIN_MEMORY_CHECK=maybe");
  expect_refused(args, "MESHTRAIN_MEMORY_LIMIT", "MESHTRAIN_MEMORY_LIMIT=lots");
}

TEST(MemoryCheck, ExportCheckpointChecksShapesAgainstItsConfig) {
  const std::string dir = testing::fresh_temp_dir("mem_ckpt");
  const Result r = run_bounded("train --set train.steps=1 --set train.peak_gflops=100 --set output.checkpoint_every=1 "
                               "--set output.dir=" + dir);
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string ckpt = dir + "/checkpoints/step-000001", manifest = ckpt + "/manifest.json";
  nlohmann::json m = nlohmann::json::parse(std::ifstream(manifest));
  std::string config = m["config"].get<std::string>();
  const std::string layers = "num_hidden_layers = 4";
  ASSERT_NE(config.find(layers), std::string::npos) << config;
  m["config"] = config.replace(config.find(layers), layers.size(), "num_hidden_layers = 3");
  std::ofstream(manifest) << m.dump(2);
  write_manifest_checksum(ckpt, m.dump(2));  // as a writer of that config would have
  expect_refused("export-checkpoint --checkpoint " + ckpt + " --out " + dir + "/exported",
                 "the weights hold 4 layers, the config gives num_hidden_layers = 3");
}

TEST(ModelLimits, SizesPastSixtyFourBitCountsNameTheKey) {
  auto refused = [](auto edit, const std::string& key) {
    ModelConfig c;
    edit(c);
    try {
      c.validate();
      ADD_FAILURE() << key << " not refused";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("model." + key + " (", 0), 0u) << e.what();
    }
  };
  refused([](ModelConfig& c) { c.hidden_size = 8'000'000'000; }, "hidden_size");
  refused([](ModelConfig& c) { c.intermediate_size = int64_t(1) << 60; }, "intermediate_size");
  refused([](ModelConfig& c) { c.vocab_size = 3'000'000'000; }, "vocab_size");
  refused([](ModelConfig& c) { c.max_position_embeddings = 1'000'000'000'000; }, "max_position_embeddings");
  refused([](ModelConfig& c) { c.num_hidden_layers = 1'000'000'000; }, "num_hidden_layers");
  refused([](ModelConfig& c) { c.hidden_size = 1 << 24, c.num_hidden_layers = 1 << 20; }, "num_hidden_layers");
  ModelConfig big;  // large but representable: a 405B-class shape
  big.hidden_size = 16384, big.intermediate_size = 53248, big.num_hidden_layers = 126;
  big.num_attention_heads = 128, big.num_key_value_heads = 8, big.vocab_size = 128256;
  big.max_position_embeddings = 131072;
  EXPECT_NO_THROW(big.validate());
}

TEST(AvailableMemory, SizesParseInBinaryUnits) {
  EXPECT_EQ(parse_memory_size("4G", "x"), int64_t(4) << 30);
  EXPECT_EQ(parse_memory_size("4GiB", "x"), int64_t(4) << 30);
  EXPECT_EQ(parse_memory_size("512m", "x"), int64_t(512) << 20);
  EXPECT_EQ(parse_memory_size("1.5T", "x"), int64_t(3) << 39);
  EXPECT_EQ(parse_memory_size("1000", "x"), 1000);
  for (const char* bad : {"", "G", "lots", "4X", "-1G", "0", "4 G", "nan"})
    EXPECT_THROW(parse_memory_size(bad, "x"), Error) << bad;
}

TEST(AvailableMemory, ReadsThisMachineOrTheOverride) {
  ASSERT_EQ(std::getenv("MESHTRAIN_MEMORY_LIMIT"), nullptr);
  const AvailableMemory real = available_memory();
  EXPECT_GT(real.bytes, 0);  // Linux: MemAvailable, or a cgroup's room
  EXPECT_TRUE(real.source == "MemAvailable" || real.source == "cgroup limit") << real.source;
  ::setenv("MESHTRAIN_MEMORY_LIMIT", "3G", 1);
  const AvailableMemory forced = available_memory();
  ::unsetenv("MESHTRAIN_MEMORY_LIMIT");
  EXPECT_EQ(forced.bytes, int64_t(3) << 30);
  EXPECT_EQ(forced.source, "MESHTRAIN_MEMORY_LIMIT");
}

}  // namespace
}  // namespace mt
