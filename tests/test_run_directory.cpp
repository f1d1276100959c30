// A run owns its output.dir: another run's files are refused unless resumed or overwritten (and
// overwriting removes only a run's own files), a second run at the same time is refused naming
// the first (a killed run's lock is taken over), `latest` never leads out of the directory,
// what crashes leave unfinished is removed at start, and a resumed run's metrics.jsonl holds
// each step once. Issue 14, item 1.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "child_process.h"
#include "core/error.h"
#include "core/file_lock.h"
#include "mesh_runs.h"
#include "run_command.h"
#include "temp_dirs.h"
#include "train/checkpoint.h"
#include "train/metrics.h"

namespace mt {
namespace {

namespace fs = std::filesystem;
using testing::fresh_temp_dir;
using testing::ChildProcess;
using testing::CommandResult;

// A small `meshtrain train` into `dir` (4 steps, a checkpoint every 2), plus `extra`.
CommandResult train(const std::string& dir, const std::string& extra = "") {
  return testing::run_command(
      "OMP_NUM_THREADS=1 timeout 120 " + std::string(MESHTRAIN_BINARY) +
      " train --set train.steps=4 --set train.seq_len=64 --set train.batch_size=4 "
      "--set train.log_every=1000 --set train.peak_gflops=100 --set data.val_fraction=0.02 "
      "--set output.checkpoint_every=2 --set output.dir=" + dir + " " + extra);
}

std::vector<int64_t> metric_steps(const std::string& dir) {
  std::vector<int64_t> out;
  for (double s : testing::metric(dir, "step")) out.push_back(int64_t(s));
  return out;
}

std::string latest_name(const std::string& dir) {
  std::ifstream f(dir + "/checkpoints/latest");
  std::string n;
  f >> n;
  return n;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

size_t line_count(const std::string& s) { return size_t(std::count(s.begin(), s.end(), '\n')); }

TEST(RunDirectory, AnotherRunIsRefusedUnlessResumedOrOverwritten) {
  const std::string dir = fresh_temp_dir("rundir_refuse");
  ASSERT_EQ(train(dir).code, 0);
  std::ofstream(dir + "/notes.txt") << "the user's own file\n";
  // Before: a shorter new run here pruned its own checkpoints (step-4 of the old run sorted
  // after them) and left `latest` naming a removed step-2.
  CommandResult r = train(dir, "--set train.steps=2");
  EXPECT_NE(r.code, 0);
  EXPECT_EQ(line_count(r.output), 1u) << r.output;
  EXPECT_TRUE(has(r.output, "holds another run (step 4); pass --overwrite to replace it or set "
                            "train.resume=latest to continue it")) << r.output;
  EXPECT_EQ(latest_name(dir), "step-000004") << "the refused run changed the directory";
  EXPECT_EQ(metric_steps(dir), (std::vector<int64_t>{1, 2, 3, 4}));

  r = train(dir, "--set train.steps=2 --overwrite");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "replaced the previous run (step 4)")) << r.output;
  EXPECT_EQ(latest_name(dir), "step-000002");
  EXPECT_FALSE(fs::exists(dir + "/checkpoints/step-000004"));
  EXPECT_EQ(metric_steps(dir), (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(fs::exists(dir + "/notes.txt")) << "--overwrite removed a file no run wrote";
  EXPECT_FALSE(fs::exists(dir + "/run.lock")) << "a finished run leaves its lock behind";

  // Overwriting the checkpoint a resume continues from is a contradiction, refused.
  r = train(dir, "--overwrite --set train.resume=latest");
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(has(r.output, "output.overwrite")) << r.output;
  // A run without checkpoints can only be replaced.
  const std::string bare = fresh_temp_dir("rundir_refuse_bare");
  ASSERT_EQ(train(bare, "--set output.checkpoint_every=0").code, 0);
  r = train(bare);
  EXPECT_TRUE(has(r.output, "holds another run (step 4, no checkpoint); pass --overwrite to replace "
                            "it or choose another output.dir")) << r.output;
}

// --overwrite replaces the whole previous run: also the report and the exports written into the
// directory afterwards (recorded there by report and export), listing them; the user's files,
// beside them or inside report/, stay. Issue 23, item 6.
TEST(RunDirectory, OverwriteRemovesReportsAndExportsButNotTheUsersFiles) {
  const std::string dir = fresh_temp_dir("rundir_overwrite_all");
  ASSERT_EQ(train(dir).code, 0);
  const std::string mt = std::string(MESHTRAIN_BINARY) + " ";
  CommandResult r = testing::run_command(mt + "report " + dir);
  ASSERT_EQ(r.code, 0) << r.output;
  r = testing::run_command(mt + "export -m " + dir + "/model --gguf " + dir + "/model.gguf --merged " + dir +
                           "/merged");
  ASSERT_EQ(r.code, 0) << r.output;
  for (const char* f : {"report.html", "report/loss.png", "model.gguf", "merged/model.safetensors"})
    ASSERT_TRUE(fs::exists(dir + "/" + f)) << f;
  std::ofstream(dir + "/notes.txt") << "the user's own file\n";
  std::ofstream(dir + "/report/my_chart.svg") << "the user's own file in report/\n";

  r = train(dir, "--set train.steps=2 --overwrite");
  ASSERT_EQ(r.code, 0) << r.output;
  for (const char* listed : {"run.toml", "metrics.jsonl", "checkpoints/", "model/", "report.html",
                             "report/loss.png", "model.gguf", "merged/model.safetensors", "merged/tokenizer.json"})
    EXPECT_TRUE(has(r.output, std::string(" ") + listed)) << listed << "\n" << r.output;
  for (const char* gone : {"report.html", "report/loss.png", "report/mfu.png", "model.gguf", "merged"})
    EXPECT_FALSE(fs::exists(dir + "/" + gone)) << gone;
  EXPECT_TRUE(fs::exists(dir + "/notes.txt"));
  EXPECT_TRUE(fs::exists(dir + "/report/my_chart.svg"));
  EXPECT_FALSE(has(r.output, "notes.txt")) << r.output;
  EXPECT_EQ(metric_steps(dir), (std::vector<int64_t>{1, 2}));
}

TEST(RunDirectory, SecondRunAtTheSameTimeIsRefusedNamingTheFirst) {
  const std::string dir = fresh_temp_dir("rundir_concurrent");
  // Before: both wrote here; one died with "filesystem error: cannot remove all ...
  // step-0000NN" and metrics.jsonl got a torn line.
  ChildProcess first({"train", "--set", "train.steps=100000", "--set", "train.seq_len=64", "--set",
                      "train.batch_size=4", "--set", "train.peak_gflops=100", "--set",
                      "data.val_fraction=0.02",  // as train() below: a resume may not change the split
                      "--set", "output.checkpoint_every=2", "--set", "output.dir=" + dir},
                     dir + ".log");
  ASSERT_TRUE(first.started());
  for (int i = 0; i < 3000 && !fs::exists(dir + "/checkpoints/latest"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(fs::exists(dir + "/checkpoints/latest")) << first.log();
  const std::string holder = "in use by pid " + std::to_string(first.pid()) + " host ";
  for (const std::string extra : {"", "--set train.resume=latest", "--overwrite"}) {
    const CommandResult r = train(dir, extra);
    EXPECT_NE(r.code, 0) << extra;
    EXPECT_EQ(line_count(r.output), 1u) << r.output;
    EXPECT_TRUE(has(r.output, holder)) << extra << ": " << r.output;
  }
  ASSERT_TRUE(first.running()) << "the second run disturbed the first:\n" << first.log();
  first.kill(SIGKILL);
  ASSERT_TRUE(first.wait(30));

  // The killed run's lock file is still there, its lock is not: a resume takes over.
  ASSERT_TRUE(fs::exists(dir + "/run.lock"));
  const int64_t at = std::stoll(latest_name(dir).substr(5));
  const CommandResult r = train(dir, "--set train.resume=latest --set train.steps=" + std::to_string(at + 2));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "took over the lock of a run that ended without releasing it (pid " +
                                std::to_string(first.pid()))) << r.output;
  const auto steps = metric_steps(dir);
  ASSERT_FALSE(steps.empty());
  for (size_t i = 0; i < steps.size(); ++i) EXPECT_EQ(steps[i], int64_t(i + 1)) << "metrics.jsonl";
  EXPECT_EQ(steps.back(), at + 2);
}

TEST(RunDirectory, LatestNeverLeadsOutOfTheRunDirectory) {
  const std::string other = fresh_temp_dir("rundir_escape_other"), dir = fresh_temp_dir("rundir_escape");
  ASSERT_EQ(train(other).code, 0);
  ASSERT_EQ(train(dir, "--set train.steps=2").code, 0);
  const std::string latest = dir + "/checkpoints/latest";
  // Before: `latest` was followed wherever it led, here into another run's checkpoints.
  for (const std::string& escape : std::vector<std::string>{"../../meshtrain_rundir_escape_other/checkpoints/step-000004",
                                                             other + "/checkpoints/step-000004", "..", "step-000004/.."}) {
    std::ofstream(latest, std::ios::trunc) << escape << "\n";
    EXPECT_THROW(resolve_checkpoint("latest", dir), Error) << escape;
    const CommandResult r = train(dir, "--set train.resume=latest --set train.steps=6");
    EXPECT_NE(r.code, 0) << escape;
    EXPECT_TRUE(has(r.output, "not a checkpoint directory of this run")) << r.output;
  }
  // A step-N that is a symlink to another run's checkpoint is not this run's either.
  fs::create_directory_symlink(other + "/checkpoints/step-000004", dir + "/checkpoints/step-000004");
  std::ofstream(latest, std::ios::trunc) << "step-000004\n";
  EXPECT_THROW(resolve_checkpoint("latest", dir), Error);
  // Left to the newest checkpoint of its own: the symlink is not one.
  fs::remove(latest);
  EXPECT_EQ(fs::path(resolve_checkpoint("latest", dir)).filename(), "step-000002");
}

TEST(RunDirectory, WhatCrashesLeftUnfinishedIsRemovedAtStart) {
  const std::string dir = fresh_temp_dir("rundir_stale");
  ASSERT_EQ(train(dir).code, 0);
  const fs::path ck = fs::path(dir) / "checkpoints";
  // What SIGKILL leaves at each point of a save, a prune or an atomic write.
  fs::create_directories(ck / "step-000006.tmp");
  std::ofstream(ck / "step-000006.tmp/shard-00000.safetensors") << "partial";
  fs::create_directories(ck / "step-000002.tmp.old");
  std::ofstream(ck / "latest.tmp.4242") << "step-0000";
  fs::create_directories(ck / "step-000005");  // no manifest: orphaned
  std::ofstream(ck / "step-000005/shard-00000.safetensors") << "orphan";
  std::ofstream(fs::path(dir) / "metrics.jsonl.tmp.77") << "{";
  std::ofstream(fs::path(dir) / "model/model.safetensors.tmp.99") << "partial";
  // Files that are not meshtrain's temporaries stay.
  std::ofstream(fs::path(dir) / "notes.tmp.txt") << "mine";
  std::ofstream(ck / "README") << "mine";

  const CommandResult r = train(dir, "--set train.resume=latest --set train.steps=6");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "removed what an interrupted run left unfinished")) << r.output;
  for (const fs::path& p : {ck / "step-000006.tmp", ck / "step-000002.tmp.old", ck / "latest.tmp.4242",
                           ck / "step-000005", fs::path(dir) / "metrics.jsonl.tmp.77",
                           fs::path(dir) / "model/model.safetensors.tmp.99"})
    EXPECT_FALSE(fs::exists(p)) << p;
  EXPECT_TRUE(fs::exists(fs::path(dir) / "notes.tmp.txt"));
  EXPECT_TRUE(fs::exists(ck / "README"));
  EXPECT_EQ(latest_name(dir), "step-000006");
}

TEST(RunDirectory, ResumedRunRecordsEachStepOnce) {
  const std::string dir = fresh_temp_dir("rundir_metrics");
  ASSERT_EQ(train(dir, "--set output.keep_checkpoints=3").code, 0);  // checkpoints at 2 and 4
  const auto whole = testing::losses(dir);
  ASSERT_EQ(whole.size(), 4u);
  // A killed run's last line may be torn.
  std::ofstream(dir + "/metrics.jsonl", std::ios::app) << "{\"step\": 5, \"lo";
  // Before: the resumed steps 3 and 4 were appended again after the first 4 lines.
  const CommandResult r = train(dir, "--set train.resume=" + dir + "/checkpoints/step-000002");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(metric_steps(dir), (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(testing::losses(dir), whole);
  EXPECT_EQ(latest_name(dir), "step-000004");
}

TEST(RunDirectory, TruncateMetricsKeepsWholeLinesUpToTheStep) {
  const std::string dir = fresh_temp_dir("rundir_truncate");
  fs::create_directories(dir);
  const std::string path = dir + "/metrics.jsonl";
  std::ofstream(path) << "{\"step\":1,\"loss\":3}\n{\"step\":2,\"loss\":2}\n{\"step\":3,\"loss\":1}\n{\"st";
  truncate_metrics(path, 2);
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  EXPECT_EQ(s.str(), "{\"step\":1,\"loss\":3}\n{\"step\":2,\"loss\":2}\n");
  truncate_metrics(dir + "/absent.jsonl", 2);
  EXPECT_FALSE(fs::exists(dir + "/absent.jsonl"));
}

// Issue 24, item 6. Was: a complete line in the middle of metrics.jsonl that was not a step's
// JSON (a flipped byte on disk) was dropped for good when a run resumed, without a word. Now it is
// moved, as it was, to metrics_unreadable.txt and the count and line numbers are returned (and
// logged by the run); a torn last line is still removed, and said so.
TEST(RunDirectory, TruncateMetricsMovesUnreadableLinesAsideAndSaysSo) {
  const std::string dir = fresh_temp_dir("rundir_unreadable");
  fs::create_directories(dir);
  const std::string path = dir + "/metrics.jsonl";
  std::ofstream(path) << "{\"step\":1,\"loss\":3}\n{\"step\":2,\"lo\x01ss\":2\n{\"step\":3,\"loss\":1}\n"
                         "[1]\n{\"step\":4,\"loss\":1}\n{\"st";
  const MetricsRewind r = truncate_metrics(path, 3);
  EXPECT_EQ(r.unreadable_lines, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(r.unreadable_file, dir + "/metrics_unreadable.txt");
  EXPECT_EQ(r.dropped_steps, 1);
  EXPECT_TRUE(r.torn_last_line);
  std::stringstream kept, aside;
  kept << std::ifstream(path).rdbuf();
  aside << std::ifstream(r.unreadable_file).rdbuf();
  EXPECT_EQ(kept.str(), "{\"step\":1,\"loss\":3}\n{\"step\":3,\"loss\":1}\n");
  EXPECT_EQ(aside.str(), "{\"step\":2,\"lo\x01ss\":2\n[1]\n");
}

// The same through a real resume: the run says what it moved, and `meshtrain report` reads the
// repaired file.
TEST(RunDirectory, ResumeKeepsACorruptMetricsLineAsideAndSaysSo) {
  const std::string dir = fresh_temp_dir("rundir_corrupt_line");
  ASSERT_EQ(train(dir).code, 0);
  std::vector<std::string> lines;
  {
    std::ifstream in(dir + "/metrics.jsonl");
    for (std::string l; std::getline(in, l);) lines.push_back(l);
  }
  ASSERT_EQ(lines.size(), 4u);
  const std::string corrupt = lines[0].substr(0, lines[0].size() / 2);  // cut inside the record
  {
    std::ofstream out(dir + "/metrics.jsonl");
    out << corrupt << "\n" << lines[1] << "\n" << lines[2] << "\n" << lines[3] << "\n";
  }
  const CommandResult r = train(dir, "--set train.resume=" + dir + "/checkpoints/step-000002");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "metrics.jsonl: 1 line(s) are not a step's JSON (line 1); moved, as they were, to " +
                                dir + "/metrics_unreadable.txt")) << r.output;
  std::stringstream aside;
  aside << std::ifstream(dir + "/metrics_unreadable.txt").rdbuf();
  EXPECT_EQ(aside.str(), corrupt + "\n");
  EXPECT_EQ(metric_steps(dir), (std::vector<int64_t>{2, 3, 4}));
  const CommandResult report = testing::run_meshtrain("report " + dir + " --out " + dir + "/report.html");
  EXPECT_EQ(report.code, 0) << report.output;
}

TEST(RunDirectory, FileLockExcludesAndIsTakenOverFromTheDead) {
  const std::string dir = fresh_temp_dir("rundir_lock");
  fs::create_directories(dir);
  const std::string path = dir + "/run.lock";
  std::ofstream(path) << "pid 999999 host gone\n";  // left by a killed process: no lock held
  std::string previous;
  {
    FileLock held(path, "the thing", &previous);
    EXPECT_EQ(previous, "pid 999999 host gone");
    try {
      FileLock again(path, "the thing");
      ADD_FAILURE() << "a held lock was taken twice";
    } catch (const Error& e) {
      EXPECT_TRUE(has(e.what(), "the thing is in use by " + this_process_label())) << e.what();
    }
  }
  EXPECT_FALSE(fs::exists(path));
  FileLock fresh(path, "the thing", &previous);
  EXPECT_EQ(previous, "");
}

// Issue 24, item 6: the root, the home and the working directory itself are refused as
// output.dir (a run there would mix run.toml, model/ and checkpoints/ with everything else, and
// --overwrite would remove them), before anything is written; so is an empty --out, which was
// taken as absent (runs/default). A subdirectory of each is fine.
TEST(RunDirectory, RootHomeWorkingDirectoryAndEmptyAreRefused) {
  const std::string base = fresh_temp_dir("rundir_shared_dirs");
  fs::create_directories(base + "/home");
  const std::string cmd = "cd " + base + " && HOME=" + base + "/home OMP_NUM_THREADS=1 timeout 120 " +
                          MESHTRAIN_BINARY + " train --set train.steps=1 --set train.seq_len=64 " +
                          "--set train.batch_size=4 --set train.peak_gflops=100 ";
  struct Case {
    std::string args, expected;
  };
  const std::vector<Case> cases = {
      {"--out /", "output.dir '/' is the root directory itself"},
      {"--out " + base + "/home", "is the home directory itself"},
      {"--out " + base + "/home/", "is the home directory itself"},
      {"--out .", "output.dir '.' is the working directory itself"},
      {"--set output.dir=" + base, "is the working directory itself"},
      {"--out ''", "output.dir must not be empty"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    const CommandResult r = testing::run_command(cmd + c.args);
    EXPECT_NE(r.code, 0);
    EXPECT_EQ(line_count(r.output), 1u) << r.output;
    EXPECT_TRUE(has(r.output, c.expected)) << r.output;
  }
  EXPECT_FALSE(fs::exists("/run.toml"));
  EXPECT_FALSE(fs::exists("/run.lock"));
  EXPECT_FALSE(fs::exists(base + "/home/run.lock"));
  EXPECT_FALSE(fs::exists(base + "/run.lock"));
  EXPECT_FALSE(fs::exists(base + "/runs"));  // --out '' did not fall back to runs/default
  const CommandResult ok = testing::run_command(cmd + "--out home/run");
  EXPECT_EQ(ok.code, 0) << ok.output;
  EXPECT_TRUE(fs::exists(base + "/home/run/metrics.jsonl"));
}

TEST(RunDirectory, RankZeroRefusingEndsEveryRank) {
  if (!testing::have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string dir = fresh_temp_dir("rundir_ranks");
  ASSERT_EQ(train(dir).code, 0);
  const auto t0 = std::chrono::steady_clock::now();
  std::string out;
  const int rc = testing::run("timeout 60 env " + testing::mpirun(2) + MESHTRAIN_BINARY +
                                  " train --mesh dp=2 --set train.steps=4 --set train.seq_len=64 "
                                  "--set train.batch_size=4 --set train.peak_gflops=100 --set output.dir=" + dir,
                              &out);
  EXPECT_NE(rc, 0);
  EXPECT_NE(rc, 124) << "the ranks did not end within 60 s";
  EXPECT_TRUE(has(out, "holds another run (step 4)")) << out;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 60.0);
}

}  // namespace
}  // namespace mt
