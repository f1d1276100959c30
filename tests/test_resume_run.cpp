// Resume follows the run (issue 23, item 2), through the meshtrain binary: `train --resume RUN`
// (and train.resume with only output.dir) takes the run's own run.toml and lists what the command
// line changes; a longer train.steps keeps the lr of the steps taken and re-plans the rest of the
// decay from the resumed step's lr, which a later resume continues bit for bit; checkpoints are on
// by default (one at the end), and a run without any names the key when asked to resume.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "mesh_runs.h"
#include "run_command.h"
#include "train/checkpoint_dir.h"
#include "train/lr_schedule.h"
#include "temp_dirs.h"

namespace mt {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::metric;

// A run directory not made yet, in a fresh scratch directory of its own.
std::string fresh_dir(const std::string& name) { return testing::fresh_temp_dir("resume_run_" + name) + "/run"; }

// `meshtrain train <args>` on one thread.
CommandResult meshtrain_train(const std::string& args) {
  return testing::run_command("OMP_NUM_THREADS=1 timeout 300 " + std::string(MESHTRAIN_BINARY) + " train " + args);
}

// The keys of a small, quick run of the built-in model; a resume is given none of them again.
const std::string kSmall =
    "--set train.seq_len=64 --set train.batch_size=4 --set train.log_every=1000 --set train.peak_gflops=100 "
    "--set data.val_fraction=0.02 ";

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

size_t line_count(const std::string& s) { return size_t(std::count(s.begin(), s.end(), '\n')); }

std::vector<double> from_step(const std::vector<double>& v, size_t first) {
  return v.size() < first ? std::vector<double>{} : std::vector<double>(v.begin() + ptrdiff_t(first - 1), v.end());
}

// Before: a resume without --config built the built-in full run and failed "checkpoint is from a
// LoRA run"; the run's keys had to be repeated on the command line.
TEST(ResumeRun, TakesTheRunsOwnConfigAndListsWhatTheCommandLineChanges) {
  const std::string dir = fresh_dir("own_config");
  CommandResult r = meshtrain_train(kSmall +
                                    "--set lora.enabled=true --set lora.random_base=true --set lora.rank=4 "
                                    "--set train.steps=4 --out " + dir);
  ASSERT_EQ(r.code, 0) << r.output;

  r = meshtrain_train("--resume " + dir + " --set train.steps=6");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "resume: taking " + dir + "/run.toml; overridden: train.steps=6 (was 4)\n")) << r.output;
  EXPECT_TRUE(has(r.output, "LoRA training")) << r.output;
  EXPECT_TRUE(has(r.output, "resumed from " + dir + "/checkpoints/" + checkpoint_name(4) + " at step 4")) << r.output;
  EXPECT_EQ(metric(dir, "step"), (std::vector<double>{1, 2, 3, 4, 5, 6}));

  // train.resume with only output.dir does the same; with nothing changed it says so.
  r = meshtrain_train("--out " + dir + " --set train.resume=latest --set train.steps=6 --set train.log_every=1000");
  EXPECT_NE(r.code, 0) << "step 6 of 6: nothing left to do";
  EXPECT_TRUE(has(r.output, "resume: taking " + dir + "/run.toml; no key overridden\n")) << r.output;
  EXPECT_TRUE(has(r.output, "nothing left to do")) << r.output;
  r = meshtrain_train("--out " + dir + " --set train.resume=latest --set train.steps=7");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "overridden: train.steps=7 (was 6)\n")) << r.output;
  EXPECT_EQ(metric(dir, "step").size(), 7u);

  // A key the checkpoint's weights depend on is still refused, named.
  r = meshtrain_train("--resume " + dir + " --set train.steps=9 --set lora.rank=8");
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(has(r.output, "lora.rank 4 -> 8")) << r.output;
  EXPECT_EQ(metric(dir, "step").size(), 7u) << "the refused resume changed the run";
}

TEST(ResumeRun, ADirectoryThatHoldsNoRunIsRefusedInOneLine) {
  const std::string dir = fresh_dir("no_run");
  fs::create_directories(dir);
  CommandResult r = meshtrain_train("--resume " + dir);
  EXPECT_NE(r.code, 0);
  EXPECT_EQ(line_count(r.output), 1u) << r.output;
  EXPECT_TRUE(has(r.output, "train.resume = \"latest\": no run.toml in " + dir)) << r.output;
  r = meshtrain_train("--resume " + dir + " --out " + dir + "_other");
  EXPECT_NE(r.code, 0);
  EXPECT_EQ(line_count(r.output), 1u) << r.output;
  EXPECT_TRUE(has(r.output, "give no --out")) << r.output;
  EXPECT_FALSE(fs::exists(dir + "_other"));
}

// A config file's keys are laid over run.toml (its paths relative to the file), the command
// line's over both.
TEST(ResumeRun, AConfigFileChangesOnlyTheKeysItGives) {
  const std::string dir = fresh_dir("config_over");
  ASSERT_EQ(meshtrain_train(kSmall + "--set train.steps=3 --set optim.lr=1e-3 --out " + dir).code, 0);
  const std::string file = dir + "_more.toml";
  std::ofstream(file) << "[train]\nsteps = 5\n[optim]\nmin_lr = 1e-4\n";
  const CommandResult r = meshtrain_train("--resume " + dir + " --config " + file + " --set train.steps=4");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "overridden: optim.min_lr=1e-4 (was 2e-4), train.steps=4 (was 3)\n")) << r.output;
  std::ifstream recorded(dir + "/run.toml");
  const std::string toml((std::istreambuf_iterator<char>(recorded)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(has(toml, "\nlr = 0.001\n")) << "the run's own lr, not the built-in run's:\n" << toml;
}

// Before: the cosine was recomputed over the new length, and the lr jumped at the resumed step
// (2.0e-4 -> 8.2e-4 in the run).
TEST(ResumeRun, ALongerRunKeepsTheLrOfTheResumedStepAndLaterResumesContinueItExactly) {
  const std::string dir = fresh_dir("longer");
  const std::string keys = kSmall + "--set optim.warmup_steps=2 --set output.checkpoint_every=10 ";
  CommandResult r = meshtrain_train(keys + "--set train.steps=20 --out " + dir);
  ASSERT_EQ(r.code, 0) << r.output;
  const std::vector<double> first_lr = metric(dir, "lr");
  ASSERT_EQ(first_lr.size(), 20u);

  // From step 10 of 20 to 40 steps.
  r = meshtrain_train("--resume " + dir + " --set train.resume=" + dir + "/checkpoints/" + checkpoint_name(10) +
                      " --set train.steps=40");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "lr schedule: train.steps 20 -> 40 on resume at step 10: steps 1-10 kept their lr; the "
                            "cosine decay is re-planned from ")) << r.output;
  EXPECT_TRUE(has(r.output, "at step 11 to optim.min_lr 0.0002 at step 40\n")) << r.output;
  const std::vector<double> lr = metric(dir, "lr");
  ASSERT_EQ(lr.size(), 40u);
  EXPECT_EQ(std::vector<double>(lr.begin(), lr.begin() + 11), std::vector<double>(first_lr.begin(), first_lr.begin() + 11))
      << "steps 1-10 as run, and step 11 at the lr the 20-step run gave it";
  // The fresh 40-step cosine, which the resume used to take, has another lr at step 11: the check
  // above can fail.
  OptimConfig optim;
  optim.lr = 2e-3f, optim.min_lr = 2e-4f, optim.warmup_steps = 2;
  EXPECT_GT(std::abs(lr_at(10, 40, optim) - float(first_lr[10])), 1e-5);
  for (size_t s = 11; s < lr.size(); ++s) EXPECT_LT(lr[s], lr[s - 1]) << "step " << s + 1;
  EXPECT_GT(lr.back(), 2e-4);
  EXPECT_LT(lr.back(), 2.1e-4) << "the decay reaches min_lr at the new end";

  // Resuming the re-planned run at step 30 with the same keys continues its schedule bit for bit
  // (each checkpoint records where its decay started), losses and all.
  const std::vector<double> lr_40 = metric(dir, "lr"), loss_40 = metric(dir, "loss");
  r = meshtrain_train("--resume " + dir + " --set train.resume=" + dir + "/checkpoints/" + checkpoint_name(30));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_FALSE(has(r.output, "lr schedule:")) << r.output;
  EXPECT_EQ(from_step(metric(dir, "lr"), 31), from_step(lr_40, 31));
  EXPECT_EQ(from_step(metric(dir, "loss"), 31), from_step(loss_40, 31));
}

// The schedule's rules beside the binary's run: a change during the warm-up keeps the fresh
// schedule; a new optim.lr starts the re-planned decay at that lr.
TEST(ResumeRun, LrScheduleRules) {
  OptimConfig optim;
  optim.lr = 1.0f, optim.min_lr = 0.1f, optim.warmup_steps = 4;
  const LrSchedule saved = fresh_lr_schedule(optim, 20);
  EXPECT_TRUE(resumed_lr_schedule(saved, fresh_lr_schedule(optim, 20), 10).note.empty());
  const LrSchedule longer = fresh_lr_schedule(optim, 40);
  const ResumedLrSchedule in_warmup = resumed_lr_schedule(saved, longer, 2);
  EXPECT_EQ(in_warmup.schedule.decay.step, 4);
  EXPECT_EQ(in_warmup.schedule.at(2), saved.at(2));
  EXPECT_TRUE(has(in_warmup.note, "the warm-up continues to step 4")) << in_warmup.note;
  const ResumedLrSchedule later = resumed_lr_schedule(saved, longer, 10);
  EXPECT_EQ(later.schedule.at(10), saved.at(10));
  EXPECT_NEAR(later.schedule.at(40), 0.1f, 1e-7);
  optim.lr = 0.5f;
  const ResumedLrSchedule new_lr = resumed_lr_schedule(saved, fresh_lr_schedule(optim, 40), 10);
  EXPECT_EQ(new_lr.schedule.at(10), 0.5f);
  EXPECT_TRUE(has(new_lr.note, "optim.lr 1 -> 0.5")) << new_lr.note;
}

// Checkpoints by default: one at the end (output.checkpoint_every = 500, longer than this run);
// with output.checkpoint_every = 0 none, and a resume says which key writes them.
TEST(ResumeRun, CheckpointsAreWrittenByDefaultAndTheirAbsenceNamesTheKey) {
  const std::string dir = fresh_dir("default_checkpoint");
  CommandResult r = meshtrain_train(kSmall + "--set train.steps=3 --out " + dir);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(latest_checkpoint(dir), (fs::path(dir) / "checkpoints" / checkpoint_name(3)).string());
  EXPECT_EQ(list_checkpoints(dir).size(), 1u);

  const std::string none = fresh_dir("no_checkpoint");
  ASSERT_EQ(meshtrain_train(kSmall + "--set train.steps=3 --set output.checkpoint_every=0 --out " + none).code, 0);
  EXPECT_FALSE(fs::exists(none + "/checkpoints"));
  r = meshtrain_train("--resume " + none + " --set train.steps=5");
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(has(r.output, "no checkpoint in " + none + "/checkpoints to resume from")) << r.output;
  EXPECT_TRUE(has(r.output, "output.checkpoint_every = 0")) << r.output;
  EXPECT_EQ(metric(none, "step").size(), 3u) << "the refused resume changed the run";
}

}  // namespace
}  // namespace mt
