// Preference training on the user's path, through the binary: the one-line DPO command on the
// bundled pairs (examples/village_prefs.jsonl) on the real pretrained stories260K, its metrics in
// the log, metrics.jsonl and the report, `eval --run` giving its last validation figures again,
// the adapter exported as PEFT, GGUF and merged like an SFT run's; full fine-tuning's precomputed
// reference kept with the run; and what cannot run refused in one line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "data_fixtures.h"
#include "run_command.h"
#include "temp_dirs.h"
#include "train/metrics.h"

namespace mt {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::fresh_temp_dir;
using testing::run_meshtrain;

const std::string kPairs = std::string(MESHTRAIN_SOURCE_DIR) + "/examples/village_prefs.jsonl";

// A figure `meshtrain eval --method` printed ("loss 0.69", "rewards/margins 0.01"); NaN if none.
double printed(const std::string& output, const std::string& key) {
  const std::string tag = ", " + key + " ";
  const size_t at = output.find(tag);
  double v = std::nan("");
  if (at != std::string::npos) std::sscanf(output.c_str() + at + tag.size(), "%lf", &v);
  return v;
}

// The last metrics.jsonl line with `key`.
double last_metric(const std::string& run, const std::string& key) {
  std::ifstream f(run + "/metrics.jsonl");
  double v = std::nan("");
  for (std::string line; std::getline(f, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains(key) && j[key].is_number()) v = j[key].get<double>();
  }
  return v;
}

const char* kShort =
    " --set train.steps=4 --set train.eval_every=2 --set train.batch_size=4 --set train.precision=fp32"
    " --set train.peak_gflops=100 --set data.format=alpaca --set data.val_fraction=0.1 ";

TEST(PreferenceCli, OneLineDpoOnTheBundledPairsEvaluatesAndExportsLikeSft) {
  MT_REQUIRE_DATA("stories260K/stories260K.bin");
  const std::string dir = fresh_temp_dir("pref_cli_lora");
  const std::string model = testing::stories_hf_dir(dir);
  ASSERT_FALSE(model.empty());
  const std::string run = dir + "/run";
  const CommandResult r =
      run_meshtrain("train --method dpo --model " + model + " --data " + kPairs + " --lora --out " + run + kShort);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("preference pairs, alpaca: 56 train / 6 validation, 0 skipped"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("reference: the base with the adapters off"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("| acc "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("validation loss 0.693147 ->"), std::string::npos) << r.output;  // policy = reference
  for (const char* key : {"rewards/chosen", "rewards/rejected", "rewards/accuracies", "rewards/margins",
                          "logps/chosen", "logps/rejected", "eval_rewards/accuracies", "eval_rewards/margins"})
    EXPECT_TRUE(std::isfinite(last_metric(run, key))) << key;

  // eval --run: the run's last validation, again (its pairs, template, length and reference).
  const CommandResult e = run_meshtrain("eval --run " + run);
  ASSERT_EQ(e.code, 0) << e.output;
  EXPECT_NE(e.output.find("6 pairs (dpo, beta 0.1, the held-out pairs of"), std::string::npos) << e.output;
  const double val = last_metric(run, "val_loss");
  EXPECT_NEAR(printed(e.output, "loss"), val, 1e-6 * val) << e.output;
  EXPECT_NEAR(printed(e.output, "rewards/margins"), last_metric(run, "eval_rewards/margins"), 1e-6) << e.output;

  // The adapter is an SFT run's: PEFT, GGUF and merged.
  const CommandResult x = run_meshtrain("export --model " + model + " --adapter " + run + "/adapter --gguf-adapter " +
                                        dir + "/adapter.gguf --merged " + dir + "/merged");
  ASSERT_EQ(x.code, 0) << x.output;
  EXPECT_TRUE(fs::exists(dir + "/adapter.gguf"));
  EXPECT_TRUE(fs::exists(dir + "/merged/config.json"));
  // Any adapter on any pairs: its base is the reference.
  const CommandResult a = run_meshtrain("eval --model " + model + " --adapter " + run + "/adapter --data " + kPairs +
                                        " --method simpo --format alpaca");
  ASSERT_EQ(a.code, 0) << a.output;
  EXPECT_NE(a.output.find("62 pairs (simpo, beta 0.1)"), std::string::npos) << a.output;

  // The report charts the margin and the accuracy; TensorBoard gets them as TRL names them.
  const CommandResult rep = run_meshtrain("report " + run + " --tensorboard " + dir + "/tb");
  ASSERT_EQ(rep.code, 0) << rep.output;
  std::stringstream html, events;
  html << std::ifstream(run + "/report.html").rdbuf();
  EXPECT_NE(html.str().find("Reward margin"), std::string::npos);
  EXPECT_NE(html.str().find("Reward accuracy"), std::string::npos);
  for (const auto& f : fs::recursive_directory_iterator(dir + "/tb"))
    if (f.is_regular_file()) events << std::ifstream(f.path(), std::ios::binary).rdbuf();
  for (const char* tag : {"rewards/accuracies", "rewards/margins", "eval/rewards/margins"})
    EXPECT_NE(events.str().find(tag), std::string::npos) << tag;
}

// The recipe of docs/fine-tuning.md: an SFT adapter trained further by DPO (lora.init_adapter),
// the reference the SFT model (precomputed before the first step): the pairs' loss starts at log 2.
TEST(PreferenceCli, SftThenDpoOnTheSameAdapter) {
  MT_REQUIRE_DATA("stories260K/stories260K.bin");
  const std::string dir = fresh_temp_dir("pref_cli_sft_dpo");
  const std::string model = testing::stories_hf_dir(dir);
  ASSERT_FALSE(model.empty());
  const CommandResult sft = run_meshtrain("train --model " + model + " --data " + std::string(MESHTRAIN_SOURCE_DIR) +
                                          "/examples/village_qa.jsonl --lora --out " + dir + "/sft" +
                                          " --set train.steps=3 --set train.batch_size=2 --set train.peak_gflops=100");
  ASSERT_EQ(sft.code, 0) << sft.output;
  const CommandResult dpo = run_meshtrain("train --method dpo --model " + model + " --data " + kPairs + " --lora --out " +
                                          dir + "/dpo --set lora.init_adapter=" + dir + "/sft/adapter" +
                                          " --set preference.reference=precomputed" + kShort);
  ASSERT_EQ(dpo.code, 0) << dpo.output;
  EXPECT_NE(dpo.output.find("adapters: from " + dir + "/sft/adapter"), std::string::npos) << dpo.output;
  EXPECT_NE(dpo.output.find("validation loss before: 0.693147"), std::string::npos) << dpo.output;
  // The base alone as the reference instead: the SFT adapter already moved the policy from it.
  const CommandResult off = run_meshtrain("train --method dpo --model " + model + " --data " + kPairs + " --lora --out " +
                                          dir + "/off --set lora.init_adapter=" + dir + "/sft/adapter" + kShort);
  ASSERT_EQ(off.code, 0) << off.output;
  EXPECT_EQ(off.output.find("validation loss before: 0.693147"), std::string::npos) << off.output;
}

TEST(PreferenceCli, FullFineTuningKeepsItsPrecomputedReferenceWithTheRun) {
  MT_REQUIRE_DATA("stories260K/stories260K.bin");
  const std::string dir = fresh_temp_dir("pref_cli_full");
  const std::string model = testing::stories_hf_dir(dir);
  ASSERT_FALSE(model.empty());
  const std::string run = dir + "/run";
  const CommandResult r = run_meshtrain("train --method ipo --model " + model + " --data " + kPairs + " --out " + run +
                                        kShort + "--set output.checkpoint_every=2");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("reference log-probabilities: 124 sequences"), std::string::npos) << r.output;
  ASSERT_TRUE(fs::exists(run + "/reference_logps.bin"));
  // eval --run reads it (the model it evaluates is the trained one).
  const CommandResult e = run_meshtrain("eval --run " + run);
  ASSERT_EQ(e.code, 0) << e.output;
  const double val = last_metric(run, "val_loss");
  EXPECT_NEAR(printed(e.output, "loss"), val, 1e-6 * val) << e.output;
  // A resume reads it too, and refuses a damaged one in one line.
  fs::remove_all(run + "/checkpoints/step-000004");
  fs::remove(run + "/checkpoints/latest");
  {
    std::fstream f(run + "/reference_logps.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(20);
    f.put('\x7f');
  }
  const CommandResult bad = run_meshtrain("train --resume " + run);
  EXPECT_NE(bad.code, 0) << bad.output;
  EXPECT_NE(bad.output.find("reference_logps.bin: checksum mismatch (damaged)"), std::string::npos) << bad.output;
  fs::remove(run + "/reference_logps.bin");
  const CommandResult gone = run_meshtrain("train --resume " + run);
  EXPECT_NE(gone.code, 0) << gone.output;
  EXPECT_NE(gone.output.find("are missing: a resumed run cannot compute them again"), std::string::npos) << gone.output;
}

// A stopped preference run resumed on the same layout continues bit for bit: the pairs' order
// (the sampler's epoch and row), the dropout masks and the reference are the uninterrupted run's.
TEST(PreferenceCli, ResumeOnTheSameLayoutIsBitExact) {
  const std::string dir = fresh_temp_dir("pref_cli_resume");
  const std::string run = dir + "/run";
  const std::string args = " --method dpo --data " + kPairs +
                           " --set data.tokenizer=byte --set data.format=alpaca --set lora.enabled=true"
                           " --set lora.random_base=true --set lora.dropout=0.1 --set train.batch_size=4"
                           " --set train.seq_len=256 --set train.steps=6 --set train.eval_every=3"
                           " --set output.checkpoint_every=3 --set train.peak_gflops=100 --out " + run;
  ASSERT_EQ(run_meshtrain("train" + args).code, 0);
  std::stringstream whole;
  whole << std::ifstream(run + "/metrics.jsonl").rdbuf();
  fs::remove_all(run + "/checkpoints/step-000006");
  fs::remove(run + "/checkpoints/latest");
  const CommandResult r = run_meshtrain("train --resume " + run);
  ASSERT_EQ(r.code, 0) << r.output;
  // Each step's figures but its timing: the same JSON.
  const auto figures = [](const std::string& text) {
    std::vector<nlohmann::json> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
      nlohmann::json j = nlohmann::json::parse(line);
      for (const char* k : {"tokens_per_s", "mfu", "elapsed_s", "eta_s", "step_s", "peak_mem_bytes",
                            "peak_tensor_bytes", "segment_start_step", "val_loss_start", "peak_flops"})
        j.erase(k);
      out.push_back(j);
    }
    return out;
  };
  std::stringstream resumed;
  resumed << std::ifstream(run + "/metrics.jsonl").rdbuf();
  const auto a = figures(whole.str()), b = figures(resumed.str());
  ASSERT_EQ(a.size(), 6u);
  ASSERT_EQ(b.size(), 6u);
  for (size_t i = 3; i < 6; ++i) EXPECT_EQ(a[i], b[i]) << "step " << i + 1;
}

// A pairs file with its own field names trains once data.columns maps them (as an SFT file's).
TEST(PreferenceCli, ColumnsMapAPairsFilesFields) {
  const std::string dir = fresh_temp_dir("pref_cli_columns");
  std::ifstream in(kPairs);
  std::string renamed;
  for (std::string line; std::getline(in, line);) {
    for (const auto& [from, to] : {std::pair<std::string, std::string>{"\"prompt\":", "\"question\":"},
                                   {"\"chosen\":", "\"good\":"}, {"\"rejected\":", "\"bad\":"}})
      line.replace(line.find(from), from.size(), to);
    renamed += line + "\n";
  }
  const std::string data = dir + "/renamed.jsonl";
  std::ofstream(data) << renamed;
  const std::string run = "train --method dpo --data " + data + " --set train.steps=1 --set train.batch_size=2 "
                          "--set train.peak_gflops=100 --set data.cache_dir=off --out " + dir + "/run";
  CommandResult r = run_meshtrain(run);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("no record is a preference pair"), std::string::npos) << r.output;
  r = run_meshtrain(run + " --set 'data.columns=[\"prompt=question\", \"chosen=good\", \"rejected=bad\"]'");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("pairs"), std::string::npos) << r.output;
}

TEST(PreferenceCli, WhatCannotRunIsRefusedInOneLine) {
  const std::string dir = fresh_temp_dir("pref_cli_refused");
  const auto refused = [](const CommandResult& r, const std::string& what) {
    EXPECT_NE(r.code, 0) << r.output;
    EXPECT_NE(r.output.find(what), std::string::npos) << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  };
  refused(run_meshtrain("train --method dpo --data " + kPairs + " --set train.batch_size=3 --out " + dir + "/a"),
          "train.batch_size (3) must be even under train.method = \"dpo\"");
  refused(run_meshtrain("train --method dpo --out " + dir + "/b"), "trains on preference pairs: give data.path");
  refused(run_meshtrain("train --method dpo --data " + kPairs + " --set preference.reference=adapters_off --out " + dir + "/c"),
          "preference.reference = \"adapters_off\" is the base with the LoRA adapters off: it needs lora.enabled");
  refused(run_meshtrain("train --set preference.beta=0.5 --out " + dir + "/d"),
          "train.method = \"sft\" does not read [preference]");
  refused(run_meshtrain("train --method kto --out " + dir + "/e"), "train.method");
  // An SFT file is not a preference file.
  refused(run_meshtrain("train --method orpo --data " + std::string(MESHTRAIN_SOURCE_DIR) +
                        "/examples/village_qa.jsonl --out " + dir + "/f"),
          "village_qa.jsonl");
}

}  // namespace
}  // namespace mt
