// Validation during training (train.eval_every) and the best checkpoint (output.keep_best), with
// the real `meshtrain` binary: the held-out loss lands in metrics.jsonl and the progress line on
// the steps it is due, equals what `meshtrain eval` measures on the same held-out text for the
// checkpoint of that step, survives a resume unchanged, and the best checkpoint survives pruning.
// (The mesh runs' val_loss equal the one-rank run's: MeshEquality in tests/test_sharded.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "mesh_runs.h"
#include "run_command.h"
#include "temp_dirs.h"
#include "text_files.h"
#include "train/checkpoint_dir.h"
#include "train/metrics.h"

namespace mt {
namespace {

namespace fs = std::filesystem;
using testing::fresh_temp_dir;
using testing::CommandResult;

// 516 bytes of text: with data.val_fraction = 0.25 the held-out tail is its last 129 bytes (the
// byte tokenizer: one token per byte), exactly four windows of train.seq_len = 32 plus the token
// each last position predicts, so the run's validation and `meshtrain eval` on that tail read the
// same windows (eval also reads a partial last window, and there is none).
const size_t kTextBytes = 516, kTailBytes = 129;
std::string write_text(const std::string& dir) {
  std::string text;
  while (text.size() < kTextBytes)
    text += "the quick brown fox jumps over the lazy dog; pack my box with five dozen liquor jugs. ";
  text.resize(kTextBytes);
  fs::create_directories(dir);
  std::ofstream(dir + "/text.txt") << text;
  std::ofstream(dir + "/tail.txt") << text.substr(kTextBytes - kTailBytes);
  return dir + "/text.txt";
}

CommandResult train(const std::string& dir, const std::string& extra) {
  return testing::run_command(
      "OMP_NUM_THREADS=1 timeout 120 " + std::string(MESHTRAIN_BINARY) +
      " train --set train.seq_len=32 --set train.batch_size=4 --set train.precision=fp32 "
      "--set train.log_every=1000 --set train.peak_gflops=100 --set optim.warmup_steps=0 "
      "--set data.val_fraction=0.25 "
      "--set data.cache_dir=off --set data.path=" + dir + "/text.txt --set output.dir=" + dir +
      "/run " + extra);
}

std::map<int64_t, double> val_losses(const std::string& dir) {
  return read_val_losses(dir + "/run/metrics.jsonl");
}

// The number after `key` in `text` (its last occurrence), NaN when absent.
double number_after(const std::string& text, const std::string& key) {
  const size_t at = text.rfind(key);
  double v = std::nan("");
  if (at != std::string::npos) std::sscanf(text.c_str() + at + key.size(), "%lf", &v);
  return v;
}

using testing::count_of;

// `meshtrain eval` of the run's checkpoint at `step` on the held-out tail.
double eval_checkpoint(const std::string& dir, int64_t step) {
  const std::string ckpt = dir + "/run/checkpoints/" + checkpoint_name(step);
  const std::string model = dir + "/exported-" + std::to_string(step);
  const CommandResult e = testing::run_meshtrain("export-checkpoint --checkpoint " + ckpt + " --out " + model);
  EXPECT_EQ(e.code, 0) << e.output;
  const CommandResult r = testing::run_meshtrain("eval --model " + model + " --data " + dir +
                                                 "/tail.txt --seq-len 32 --batch 4");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find(std::to_string(kTailBytes - 1) + " tokens"), std::string::npos) << r.output;
  return number_after(r.output, "mean loss ");
}

TEST(EvalEvery, ValidationLossOfEachDueStepEqualsMeshtrainEvalOfItsCheckpoint) {
  const std::string dir = fresh_temp_dir("evalevery_eval");
  write_text(dir);
  const CommandResult r = train(dir, "--set train.steps=5 --set train.eval_every=2 "
                                     "--set output.checkpoint_every=1 --set output.keep_checkpoints=5");
  ASSERT_EQ(r.code, 0) << r.output;
  // Steps 2 and 4, and the last; not 1 or 3.
  const std::map<int64_t, double> val = val_losses(dir);
  ASSERT_EQ(val.size(), 3u) << r.output;
  ASSERT_TRUE(val.count(2) && val.count(4) && val.count(5)) << r.output;
  // Each on its progress line (log_every is 1000: only the evaluations and the last step print).
  EXPECT_EQ(count_of(r.output, " | val "), 3u) << r.output;
  EXPECT_NE(r.output.find("step 2/5 | loss "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("step 3/5 | loss "), std::string::npos) << r.output;
  // The measurement belongs to the model after that step: `meshtrain eval` of that step's
  // checkpoint gives it, and the losses of different steps are told apart (training moves them
  // further than the tolerance), so a value from another step's model fails.
  for (const auto& [step, loss] : val) EXPECT_NEAR(eval_checkpoint(dir, step), loss, 1e-5 * loss) << "step " << step;
  EXPECT_GT(std::abs(val.at(2) - val.at(4)), 1e-3 * val.at(2));
  // The end-of-run validation is the last step's.
  const std::vector<double> before_after = testing::validation_losses(r.output);
  ASSERT_EQ(before_after.size(), 2u) << r.output;
  EXPECT_NEAR(before_after[1], val.at(5), 1e-5 * val.at(5));
}

TEST(EvalEvery, ResumedRunRecordsTheSameValidationLosses) {
  const std::string dir = fresh_temp_dir("evalevery_resume");
  write_text(dir);
  const std::string args = "--set train.steps=6 --set train.eval_every=2 --set output.checkpoint_every=2 "
                           "--set output.keep_checkpoints=3 ";
  const CommandResult r = train(dir, args);
  ASSERT_EQ(r.code, 0) << r.output;
  const std::map<int64_t, double> whole = val_losses(dir);
  ASSERT_EQ(whole.size(), 3u) << r.output;
  const CommandResult resumed = train(dir, args + "--set train.resume=" + dir + "/run/checkpoints/" + checkpoint_name(2));
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  // The resumed run starts from the model whose loss step 2 recorded, and records steps 2, 4 and 6
  // once each, with the uninterrupted run's values (one rank: bit for bit).
  EXPECT_NEAR(number_after(resumed.output, "validation loss before: "), whole.at(2), 1e-5 * whole.at(2));
  EXPECT_EQ(val_losses(dir), whole);
}

TEST(EvalEvery, BestCheckpointSurvivesPruningAndResume) {
  const std::string dir = fresh_temp_dir("evalevery_best");
  write_text(dir);
  const std::string args = "--set train.eval_every=1 --set output.keep_best=true --set output.checkpoint_every=1 "
                           "--set output.keep_checkpoints=1 ";
  const CommandResult r = train(dir, args + "--set train.steps=3");
  ASSERT_EQ(r.code, 0) << r.output;
  // Then a learning rate that wrecks the model: the validation loss rises from step 4 on, and the
  // best of the first three steps must outlive the pruning of every later checkpoint but the
  // newest (and the resume must remember how low the best was, or step 4 would replace it).
  const CommandResult wrecked =
      train(dir, args + "--set train.steps=6 --set train.resume=latest --set optim.lr=5");
  ASSERT_EQ(wrecked.code, 0) << wrecked.output;
  const std::map<int64_t, double> val = val_losses(dir);
  ASSERT_EQ(val.size(), 6u) << wrecked.output;
  int64_t lowest = 0;
  for (const auto& [step, loss] : val)
    if (lowest == 0 || loss < val.at(lowest)) lowest = step;
  ASSERT_LE(lowest, 3) << "the wrecked steps did not raise the validation loss\n" << wrecked.output;
  EXPECT_EQ(best_checkpoint_step(dir + "/run"), lowest);
  std::vector<int64_t> kept;
  for (const StoredCheckpoint& c : list_checkpoints(dir + "/run")) kept.push_back(c.step);
  EXPECT_EQ(kept, (std::vector<int64_t>{lowest, 6}));
  EXPECT_EQ(fs::path(latest_checkpoint(dir + "/run")).filename(), checkpoint_name(6));
}

TEST(EvalEvery, PruningKeepsTheBestAndBestStaysInsideTheRun) {
  const std::string dir = fresh_temp_dir("evalevery_prune");
  const fs::path root = checkpoints_root(dir);
  for (int64_t s = 1; s <= 4; ++s) {
    fs::create_directories(root / checkpoint_name(s));
    std::ofstream(root / checkpoint_name(s) / "manifest.json") << "{}";
  }
  auto steps = [&] {
    std::vector<int64_t> out;
    for (const StoredCheckpoint& c : list_checkpoints(dir)) out.push_back(c.step);
    return out;
  };
  set_best(dir, 2);
  prune_checkpoints(dir, 4, 1);
  EXPECT_EQ(steps(), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(best_checkpoint_step(dir), 2);
  // Once another is the best, the old one is pruned like any other.
  set_best(dir, 4);
  prune_checkpoints(dir, 4, 1);
  EXPECT_EQ(steps(), (std::vector<int64_t>{4}));
  // `best` naming a checkpoint that is gone names none; naming anything but a step-N of this
  // run is refused, like `latest`.
  set_best(dir, 2);
  EXPECT_EQ(best_checkpoint_step(dir), -1);
  for (const std::string escape : {"../../elsewhere/step-000001", "..", "step-000004/.."}) {
    std::ofstream(root / "best", std::ios::trunc) << escape << "\n";
    EXPECT_THROW(best_checkpoint_step(dir), Error) << escape;
  }
  // A killed write of `best` leaves a temporary that the next start removes.
  std::ofstream(root / "best.tmp.4242") << "step-0";
  EXPECT_EQ(remove_stale_checkpoint_files(dir), (std::vector<std::string>{"best.tmp.4242"}));
}

TEST(EvalEvery, WhatCannotBeMeasuredIsRefusedInOneLine) {
  const std::string dir = fresh_temp_dir("evalevery_refused");
  write_text(dir);
  CommandResult r = train(dir, "--set train.steps=2 --set output.keep_best=true");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("output.keep_best needs train.eval_every > 0"), std::string::npos) << r.output;
  r = train(dir, "--set train.steps=2 --set train.eval_every=1 --set data.val_fraction=0");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("train.eval_every = 1 but the data has no held-out validation set"),
            std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir + "/run/metrics.jsonl"));
}

}  // namespace
}  // namespace mt
