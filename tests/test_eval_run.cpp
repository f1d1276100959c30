// `meshtrain eval --run RUN_DIR` follows the run: its model, tokenizer, data, template, held-out
// split, sequence length and validation budget, so it gives the run's last validation loss again
// (fp32, within 1e-6 relative). The trainer's validation reads a fixed train.eval_tokens of
// held-out tokens, so it does not depend on the batch size, gradient accumulation or the number of
// data-parallel ranks. Through the real binary, and mpirun for dp = 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "data_fixtures.h"
#include "mesh_runs.h"
#include "run_command.h"
#include "temp_dirs.h"
#include "train/metrics.h"

namespace mt {
namespace {

namespace fs = std::filesystem;
using testing::fresh_temp_dir;
using testing::CommandResult;
using testing::run_meshtrain;

// The mean loss `meshtrain eval` printed; NaN when it printed none.
double eval_loss(const CommandResult& r) {
  const std::string key = "mean loss ";
  const size_t at = r.output.rfind(key);
  double v = std::nan("");
  if (at != std::string::npos) std::sscanf(r.output.c_str() + at + key.size(), "%lf", &v);
  return v;
}

// The validation loss of a run's last step (train.eval_every), from metrics.jsonl.
double last_val_loss(const std::string& run_dir) {
  const std::map<int64_t, double> val = read_val_losses(run_dir + "/metrics.jsonl");
  return val.empty() ? std::nan("") : val.rbegin()->second;
}

void expect_same_loss(double a, double b, const std::string& what) {
  EXPECT_TRUE(std::isfinite(a) && std::isfinite(b)) << what << ": " << a << " vs " << b;
  EXPECT_NEAR(a, b, 1e-6 * std::abs(a)) << what;
}

// The built-in run (new model, built-in text, byte tokenizer) in fp32 with `shape` (batch and
// accumulation), seq 64: its held-out tail is about 15 windows, more than the 8 batches of one row
// the validation used to read at batch size 1.
std::string builtin_run(const std::string& mesh, const std::string& out, const std::string& shape) {
  return testing::train_command(mesh) + "--out " + out +
         " --set train.steps=2 --set train.eval_every=2 --set train.seq_len=64 --set train.precision=fp32"
         " --set train.peak_gflops=100 --set optim.warmup_steps=0 " + shape;
}

TEST(EvalRun, ValidationReadsTheSameRowsWhateverTheBatchShape) {
  const std::string dir = fresh_temp_dir("evalrun_shape");
  // Eight rows a step either way: 1 x 8 (one row, eight micro-batches) and 8 x 1.
  CommandResult a = testing::run_command(builtin_run("", dir + "/1x8", "--set train.batch_size=1 --set train.grad_accum=8"));
  ASSERT_EQ(a.code, 0) << a.output;
  CommandResult b = testing::run_command(builtin_run("", dir + "/8x1", "--set train.batch_size=8 --set train.grad_accum=1"));
  ASSERT_EQ(b.code, 0) << b.output;
  // Before training the models are the same: the same rows give the same loss.
  const auto va = testing::validation_losses(a.output), vb = testing::validation_losses(b.output);
  ASSERT_EQ(va.size(), 2u) << a.output;
  ASSERT_EQ(vb.size(), 2u) << b.output;
  EXPECT_NEAR(va[0], vb[0], 1e-6 * va[0]) << a.output << b.output;
  // After two steps of the same rows (accumulated in another order) too.
  expect_same_loss(last_val_loss(dir + "/1x8"), last_val_loss(dir + "/8x1"), "1 x 8 against 8 x 1");
  EXPECT_NE(a.output.find("validation: 15 held-out rows of 64 tokens (train.eval_tokens = 16384)"), std::string::npos)
      << a.output;
  // And eval --run gives each run's number again.
  expect_same_loss(eval_loss(run_meshtrain("eval --run " + dir + "/1x8")), last_val_loss(dir + "/1x8"), "eval --run 1x8");
  // A smaller budget reads fewer rows: the first ceil(200 / 64) = 4.
  CommandResult c = testing::run_command(builtin_run("", dir + "/budget", "--set train.eval_tokens=200"));
  ASSERT_EQ(c.code, 0) << c.output;
  EXPECT_NE(c.output.find("validation: 4 held-out rows of 64 tokens"), std::string::npos) << c.output;
  const CommandResult e = run_meshtrain("eval --run " + dir + "/budget");
  EXPECT_NE(e.output.find("(4 rows of 64 tokens, train.eval_tokens = 200), 256 tokens"), std::string::npos) << e.output;
  expect_same_loss(eval_loss(e), last_val_loss(dir + "/budget"), "eval --run with train.eval_tokens = 200");
}

TEST(EvalRun, DataParallelValidationEqualsOneRanksAndEvalRunGivesItAgain) {
  if (!testing::have_mpirun()) GTEST_SKIP() << "mpirun not found";
  const std::string dir = fresh_temp_dir("evalrun_dp");
  // dp = 2 with 2 x 4 rows a step against one rank's 8 x 1: the same 8 rows, the same held-out rows.
  CommandResult one = testing::run_command(builtin_run("", dir + "/one", "--set train.batch_size=8"));
  ASSERT_EQ(one.code, 0) << one.output;
  CommandResult dp = testing::run_command(builtin_run("dp=2", dir + "/dp", "--set train.batch_size=2 --set train.grad_accum=4"));
  ASSERT_EQ(dp.code, 0) << dp.output;
  expect_same_loss(last_val_loss(dir + "/one"), last_val_loss(dir + "/dp"), "dp=2 against one rank");
  expect_same_loss(eval_loss(run_meshtrain("eval --run " + dir + "/dp")), last_val_loss(dir + "/dp"), "eval --run of dp=2");
}

TEST(EvalRun, LoraRunOnExamplesIsReproducedByEvalRunAndByItsAdapterDirectory) {
  MT_REQUIRE_DATA("stories260K/stories260K.bin");
  MT_REQUIRE_DATA("instruct/alpaca_tiny.json");
  const std::string dir = fresh_temp_dir("evalrun_lora");
  const std::string model = testing::stories_hf_dir(dir);
  ASSERT_FALSE(model.empty());
  // The one-line fine-tune: the sequence length comes from the data (512 here), the template is
  // Alpaca's, and the held-out examples are the split's.
  const std::string run = dir + "/run";
  const CommandResult r = run_meshtrain("train --model " + model + " --data " + testdata::data_dir() +
                                        "instruct/alpaca_tiny.json --lora --out " + run +
                                        " --set train.steps=2 --set train.eval_every=2 --set train.batch_size=2"
                                        " --set train.precision=fp32 --set data.cache_dir=off --set train.peak_gflops=100");
  ASSERT_EQ(r.code, 0) << r.output;
  const double val = last_val_loss(run);
  const CommandResult e = run_meshtrain("eval --run " + run);
  ASSERT_EQ(e.code, 0) << e.output;
  EXPECT_NE(e.output.find("rows of 512 tokens"), std::string::npos) << e.output;
  expect_same_loss(eval_loss(e), val, "eval --run");
  // The adapter directory the run wrote takes the same defaults from run.toml.
  const CommandResult a = run_meshtrain("eval --model " + model + " --adapter " + run + "/adapter");
  ASSERT_EQ(a.code, 0) << a.output;
  expect_same_loss(eval_loss(a), val, "eval --adapter RUN/adapter");
  // Another data file is scored whole at the run's length (its examples up to 512 tokens kept).
  const CommandResult whole = run_meshtrain("eval --model " + model + " --adapter " + run + "/adapter -d " +
                                            testdata::data_dir() + "instruct/alpaca_tiny.json");
  ASSERT_EQ(whole.code, 0) << whole.output;
  EXPECT_NE(whole.output.find("82 examples (alpaca, 18 skipped)"), std::string::npos) << whole.output;
}

// eval --run of a bf16 run computes in bf16, as the run's validation did, and says so (it computed
// in fp32 and did not say: 0.187034 against the run's 0.186820); --precision still chooses.
TEST(EvalRun, EvaluatesInTheRunsPrecisionAndSaysSo) {
  const std::string dir = fresh_temp_dir("evalrun_precision");
  const CommandResult r = testing::run_command(testing::train_command("") + "--out " + dir +
                                               "/bf16 --set train.steps=2 --set train.eval_every=2 --set "
                                               "train.seq_len=64 --set train.precision=bf16 --set train.peak_gflops=100");
  ASSERT_EQ(r.code, 0) << r.output;
  const CommandResult e = run_meshtrain("eval --run " + dir + "/bf16");
  ASSERT_EQ(e.code, 0) << e.output;
  EXPECT_NE(e.output.find("eval: computed in the run's precision, bf16 (train.precision; --precision fp32 for the other)"),
            std::string::npos) << e.output;
  // Near, not equal: bf16 activations round the sums of another batch shape (15 rows at once here,
  // the run's batches of 4) differently; measured 2.7e-5 of the loss (fp32: 3.2e-5), AMD EPYC.
  const double val = last_val_loss(dir + "/bf16");
  EXPECT_NEAR(eval_loss(e), val, 2e-4 * val) << e.output;
  const CommandResult f = run_meshtrain("eval --run " + dir + "/bf16 --precision fp32");
  ASSERT_EQ(f.code, 0) << f.output;
  EXPECT_EQ(f.output.find("in the run's precision"), std::string::npos) << f.output;
  EXPECT_TRUE(std::isfinite(eval_loss(f))) << f.output;
}

TEST(EvalRun, WhatCannotBeEvaluatedIsRefusedInOneLine) {
  MT_REQUIRE_DATA("stories260K/stories260K.bin");
  const std::string dir = fresh_temp_dir("evalrun_refused");
  const std::string model = testing::stories_hf_dir(dir);
  ASSERT_FALSE(model.empty());
  std::ofstream(dir + "/text.txt") << std::string(3000, 'a');
  const auto one_line_error = [](const CommandResult& r, const std::string& what) {
    EXPECT_NE(r.code, 0) << r.output;
    EXPECT_NE(r.output.find(what), std::string::npos) << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  };
  // A length above the model's limit is refused, not cut to it.
  one_line_error(run_meshtrain("eval -m " + model + " -d " + dir + "/text.txt --seq-len 1024"),
                 "eval: --seq-len 1024 is more than the model's max_position_embeddings (512); give at most 512");
  one_line_error(run_meshtrain("eval --run " + dir), "no run.toml there");
  one_line_error(run_meshtrain("eval -m " + model), "eval: give --data FILE (or --run RUN_DIR");
  one_line_error(run_meshtrain("eval -d " + dir + "/text.txt"), "eval: give --model MODEL (or --run RUN_DIR)");
  // A run without a held-out set, and --run with a model of its own.
  const std::string run = dir + "/run";
  CommandResult t = run_meshtrain("train --out " + run + " --set train.steps=1 --set data.val_fraction=0 "
                                  "--set train.peak_gflops=100");
  ASSERT_EQ(t.code, 0) << t.output;
  one_line_error(run_meshtrain("eval --run " + run), "held nothing out (data.val_fraction = 0)");
  one_line_error(run_meshtrain("eval --run " + run + " -m " + model), "give --run or --model/--adapter, not both");
}

}  // namespace
}  // namespace mt
