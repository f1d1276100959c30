// Ranks that were told different things, or that stop: refused at the start naming the config
// keys, or ended by the collective watchdog naming the rank, collective and sequence number
// (src/train/run_agreement.h, src/parallel/checked_comm.h). Real mpirun ranks, each command under
// `timeout` so that a regression (a hang) fails the test instead of stalling the suite.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>
#include <string>
#include <thread>

#include "checkpoint_edits.h"
#include "mesh_runs.h"
#include "parallel/flight_recorder.h"
#include "parallel/watchdog.h"
#include "temp_dirs.h"

namespace {

namespace fs = std::filesystem;
using mt::testing::have_mpirun;
using mt::testing::run;

const char* kRun =
    "--set train.steps=4 --set train.precision=fp32 --set train.peak_gflops=100 "
    "--set train.batch_size=4 --set train.seq_len=64 --set train.log_every=100";

std::string rank_command(const std::string& mesh, const std::string& dir, const std::string& extra) {
  return std::string("-n 1 ") + MESHTRAIN_BINARY + " train --mesh " + mesh + " " + kRun +
         " --set output.dir=" + dir + " " + extra;
}

// Two ranks under one mpirun (MPMD), each with its own --set options; at most 120 s.
int run_two_ranks(const std::string& mesh, const std::string& tag, const std::string& rank0,
                  const std::string& rank1, std::string* out) {
  const std::string dir = mt::testing::fresh_temp_dir("rank_check_" + tag) + "/run";
  return run("OMP_NUM_THREADS=1 timeout 120 mpirun --allow-run-as-root --oversubscribe " +
                 rank_command(mesh, dir, rank0) + " : " + rank_command(mesh, dir, rank1),
             out);
}

TEST(RankChecks, DifferentStepsOrSeqLenUnderFsdpAreRefusedNamingTheKeys) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  std::string out;
  const int rc = run_two_ranks("fsdp=2", "fsdp", "", "--set train.steps=5 --set train.seq_len=32", &out);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(rc, 124) << "timed out (hung) instead of refusing:\n" << out;
  EXPECT_NE(out.find("ranks disagree on the run config"), std::string::npos) << out;
  EXPECT_NE(out.find("train.steps (rank 0: 4, rank 1: 5); train.seq_len (rank 0: 64, rank 1: 32)"),
            std::string::npos) << out;
}

TEST(RankChecks, DifferentLrOrSeedUnderDpAreRefusedNamingTheKeys) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  std::string out;
  const int rc = run_two_ranks("dp=2", "dp", "--set optim.lr=0.002 --set train.seed=1",
                               "--set optim.lr=0.001 --set train.seed=2", &out);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(rc, 124) << "timed out instead of refusing:\n" << out;
  EXPECT_NE(out.find("optim.lr (rank 0: 0.002, rank 1: 0.001)"), std::string::npos) << out;
  EXPECT_NE(out.find("train.seed (rank 0: 1, rank 1: 2)"), std::string::npos) << out;
  EXPECT_EQ(out.find("done:"), std::string::npos) << out;
}

// Each rank reads model.path itself: the same path (here relative, each rank in its own working
// directory) can hold different models on different hosts, named before any weight moves.
TEST(RankChecks, DifferentModelFilesUnderFsdpAreRefusedNamingTheShapes) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const fs::path base = mt::testing::fresh_temp_dir("rank_check_models");
  std::string out;
  for (const std::string layers : {"2", "3"}) {
    ASSERT_EQ(run("OMP_NUM_THREADS=1 " + std::string(MESHTRAIN_BINARY) + " train " + kRun +
                      " --set train.steps=1 --set model.num_hidden_layers=" + layers +
                      " --set output.dir=" + (base / layers).string(), &out), 0) << out;
  }
  // model.path on the command line is relative to each rank's working directory.
  const std::string args = " train --mesh fsdp=2 --set model.path=model " + std::string(kRun) +
                           " --set output.dir=" + (base / "out").string();
  const int rc = run("OMP_NUM_THREADS=1 timeout 120 mpirun --allow-run-as-root --oversubscribe -n 1 "
                     "--wdir " + (base / "2").string() + " " + MESHTRAIN_BINARY + args +
                     " : -n 1 --wdir " + (base / "3").string() + " " + MESHTRAIN_BINARY + args, &out);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(rc, 124) << "timed out instead of refusing:\n" << out;
  EXPECT_NE(out.find("ranks disagree on the model and tokenizer (each rank reads model.path itself): "
                     "num_hidden_layers (rank 0: 2, rank 1: 3); model.layers.2."),
            std::string::npos) << out;
  EXPECT_NE(out.find("; and 4 more"), std::string::npos) << out;  // 9 tensors of layer 2, 1 + 5 shown
}

// Issue 24, item 5. Same-shaped models with different weights (two seeds) under one relative
// model.path: the shapes agree, so each rank used to train its own replica and the replicas drifted
// apart without a word. Now the ranks that hold the same block compare a CRC32C of its values
// before any step, and refuse naming the tensor and which rank holds which checksum: dp replicas
// (every tensor), and under tp the norms every tp rank holds whole (the matrices are split, each
// rank's block its own, so they are not compared).
TEST(RankChecks, SameShapedDifferentWeightsAreRefusedNamingTheTensorAndRanks) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const fs::path base = mt::testing::fresh_temp_dir("rank_check_values");
  std::string out;
  for (const std::string seed : {"1", "2"}) {
    ASSERT_EQ(run("OMP_NUM_THREADS=1 " + std::string(MESHTRAIN_BINARY) + " train " + kRun +
                      " --set train.steps=1 --set train.seed=" + seed + " --set output.dir=" + (base / seed).string(),
                  &out), 0) << out;
  }
  for (const std::string mesh : {"dp=2", "tp=2"}) {
    SCOPED_TRACE(mesh);
    const std::string args = " train --mesh " + mesh + " --set model.path=model " + std::string(kRun) +
                             " --set output.dir=" + (base / ("out_" + mesh)).string();
    const int rc = run("OMP_NUM_THREADS=1 timeout 120 mpirun --allow-run-as-root --oversubscribe -n 1 "
                       "--wdir " + (base / "1").string() + " " + MESHTRAIN_BINARY + args +
                       " : -n 1 --wdir " + (base / "2").string() + " " + MESHTRAIN_BINARY + args, &out);
    EXPECT_NE(rc, 0) << out;
    EXPECT_NE(rc, 124) << "timed out instead of refusing:\n" << out;
    EXPECT_NE(out.find("ranks hold different values of the same tensor (each rank loads model.path itself"),
              std::string::npos) << out;
    // dp: the first tensor of the model, whole; tp: the first norm, which both tp ranks hold whole.
    const std::string first = mesh == "dp=2" ? "model.embed_tokens.weight [0:" : "model.layers.0.input_layernorm.weight [0:";
    EXPECT_NE(out.find(first), std::string::npos) << out;
    EXPECT_NE(out.find("(rank 0: crc32c "), std::string::npos) << out;
    EXPECT_NE(out.find("; rank 1: crc32c "), std::string::npos) << out;
    EXPECT_EQ(out.find("done:"), std::string::npos) << out;
  }
  // The same files on both ranks (the same seed's model in both directories) start and train.
  fs::remove_all(base / "2" / "model");
  fs::copy(base / "1" / "model", base / "2" / "model", fs::copy_options::recursive);
  const std::string args = " train --mesh dp=2 --set model.path=model " + std::string(kRun) +
                           " --set output.dir=" + (base / "out_same").string();
  EXPECT_EQ(run("OMP_NUM_THREADS=1 timeout 120 mpirun --allow-run-as-root --oversubscribe -n 1 "
                "--wdir " + (base / "1").string() + " " + MESHTRAIN_BINARY + args +
                " : -n 1 --wdir " + (base / "2").string() + " " + MESHTRAIN_BINARY + args, &out), 0) << out;
}

// Issue 34, item 2. Was: replicas were compared when the model loaded but not after a resume
// loaded a checkpoint, so ranks resuming from different copies of it (each host its own; here each
// rank's working directory, one copy's tensor edited and its checksums recomputed) trained apart
// without a word. Now a resume compares every replicated block, and its AdamW moments, again.
TEST(RankChecks, AResumeFromDifferingCopiesIsRefusedNamingTheTensorAndRanks) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const fs::path base = mt::testing::fresh_temp_dir("rank_check_resume");
  std::string out;
  ASSERT_EQ(run("OMP_NUM_THREADS=1 " + std::string(MESHTRAIN_BINARY) + " train " + kRun +
                    " --set train.steps=2 --set output.checkpoint_every=1 --set output.dir=" +
                    (base / "saved" / "run").string(), &out), 0) << out;
  const std::string ckpt = "run/checkpoints/step-000002";  // relative: each rank its own copy
  const auto resume_two_copies = [&](const std::string& tensor) {
    for (const char* rank : {"0", "1"}) {
      fs::remove_all(base / rank);
      fs::copy(base / "saved", base / rank, fs::copy_options::recursive);
    }
    if (!tensor.empty()) mt::testing::plant_value(base / "1" / ckpt, tensor, 0.5f);
    const std::string args = " train --mesh dp=2 " + std::string(kRun) +
                             " --set output.dir=run --set train.resume=" + ckpt + " --set train.steps=3";
    return run("OMP_NUM_THREADS=1 timeout 120 mpirun --allow-run-as-root --oversubscribe -n 1 --wdir " +
                   (base / "0").string() + " " + MESHTRAIN_BINARY + args + " : -n 1 --wdir " + (base / "1").string() +
                   " " + MESHTRAIN_BINARY + args, &out);
  };
  for (const std::string tensor : {"model.embed_tokens.weight", "model.norm.weight.exp_avg_sq"}) {
    SCOPED_TRACE(tensor);
    const int rc = resume_two_copies(tensor);
    EXPECT_NE(rc, 0) << out;
    EXPECT_NE(rc, 124) << "timed out instead of refusing:\n" << out;
    EXPECT_NE(out.find("ranks hold different values of the same tensor (each rank loads the checkpoint itself, " +
                       ckpt + ": give every rank the same copy): " + tensor + " [0:"),
              std::string::npos) << out;
    EXPECT_NE(out.find("(rank 0: crc32c "), std::string::npos) << out;
    EXPECT_EQ(out.find("done:"), std::string::npos) << out;
  }
  // The same copy on both ranks resumes.
  EXPECT_EQ(resume_two_copies(""), 0) << out;
  EXPECT_NE(out.find("resumed from"), std::string::npos) << out;
}

// The keys about a rank's own host may differ; debug mode checks every collective of a real
// FSDP run (gathers, reduce-scatters, sums, checkpoint) and finds them in step.
TEST(RankChecks, PerRankKeysMayDifferAndDebugModePassesARealRun) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  std::string out;
  const std::string both = "--set train.debug_collectives=true --set output.checkpoint_every=2 ";
  const int rc = run_two_ranks("fsdp=2", "per_rank",
                               both + "--set data.cache_dir=off",
                               both + "--set train.peak_gflops=50", &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("done: 4 steps"), std::string::npos) << out;
}

// A rank stopped mid-run (SIGSTOP: alive, so mpirun sees nothing wrong) leaves the other blocked
// in its next collective; the watchdog there names it and ends the job within the timeout.
TEST(RankChecks, StoppedRankEndsTheJobWithTheWatchdogsReport) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string dir = mt::testing::fresh_temp_dir("rank_check_stopped") + "/run";
  fs::remove(dir + ".rc");
  const std::string args = std::string(kRun) +
                           " --set train.steps=100000 --set train.collective_timeout=3 "
                           "--set output.dir=" + dir;
  // Once a step is logged, stop the newest rank; then wait at most 60 s for the job to end, and
  // kill what is left of it either way (a stopped process would otherwise stay forever).
  const std::string script = dir + ".sh";
  std::ofstream(script)
      << "(" << mt::testing::train_command("dp=2") << args << " > " << dir << ".log 2>&1; echo $? > "
      << dir << ".rc) &\n"
      << "for i in $(seq 1 600); do [ -s " << dir << "/metrics.jsonl ] && break; sleep 0.1; done\n"
      << "pkill -STOP -n -f 'output.dir=" << dir << "$'\n"
      << "for i in $(seq 1 600); do [ -f " << dir << ".rc ] && break; sleep 0.1; done\n"
      << "pkill -9 -f 'output.dir=" << dir << "$'\n"
      << "exit 0\n";
  const auto t0 = std::chrono::steady_clock::now();
  run("bash " + script);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(fs::exists(dir + ".rc")) << "the job did not end within 60 s of a rank stopping";
  const mt::testing::BackgroundJob job = mt::testing::background_job(dir);
  EXPECT_NE(job.rc, 0);
  EXPECT_TRUE(std::regex_search(
      job.log, std::regex("watchdog \\[rank [01]/2\\]: rank [01] stuck in (the wait for )?[a-z_]+ "
                            "#[0-9]+ on [a-z+]+( \\([^)]*\\))? for [3-9]\\.[0-9] s "
                            "\\(train\\.collective_timeout\\)")))
      << job.log;
  EXPECT_NE(job.log.find("last finished collectives"), std::string::npos) << job.log;
  EXPECT_LT(waited, 90.0);
}

// The watchdog alone: it stays quiet while collectives finish, however many, and reports the
// one that blocks past the timeout with its group, sequence number, signature and the history.
TEST(Watchdog, ReportsOnlyACollectiveBlockedPastTheTimeout) {
  using namespace mt::parallel;
  using std::chrono::steady_clock;
  FlightRecorder recorder;
  std::string report;
  std::mutex m;
  auto reported = [&] {
    std::lock_guard lock(m);
    return report;
  };
  Watchdog dog(recorder, 1.0, "rank 3", "test.timeout", [&](const std::string& r) {
    std::lock_guard lock(m);
    report = r;
  });
  CollectiveRecord r;
  r.group = "dp";
  r.sig = {.seq = 0, .op = CollectiveOp::all_reduce_sum, .kind = ElemKind::f32, .elem_bytes = 4,
           .count = 10};
  for (const auto until = steady_clock::now() + std::chrono::milliseconds(1500);
       steady_clock::now() < until;) {  // 1.5 s of short collectives: more than the timeout
    ++r.sig.seq;
    recorder.enter(r);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    recorder.leave();
  }
  EXPECT_EQ(reported(), "");
  r.group = "fsdp";
  r.sig = {.seq = 42, .op = CollectiveOp::all_gather, .kind = ElemKind::raw, .elem_bytes = 2,
           .count = 8};
  r.waiting = true;
  recorder.enter(r);
  // Reported after the 1 s timeout (waiting up to 20 s: the machine may be loaded).
  for (const auto until = steady_clock::now() + std::chrono::seconds(20);
       reported().empty() && steady_clock::now() < until;)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const std::string text = reported();
  EXPECT_NE(text.find("rank 3 stuck in the wait for all_gather #42 on fsdp (2-byte x 8, 16 bytes) "
                      "for "), std::string::npos) << text;
  EXPECT_NE(text.find(" s (test.timeout)"), std::string::npos) << text;
  EXPECT_NE(text.find("  all_reduce_sum #"), std::string::npos) << text;  // the history
}

// The totals run_summary.json reports: per group and collective, calls and bytes at the issue,
// blocked seconds of the call and of a non-blocking one's wait; cleared by reset_totals.
TEST(FlightRecorder, SumsCallsBytesAndSecondsPerGroupAndCollective) {
  using namespace mt::parallel;
  FlightRecorder recorder;
  CollectiveRecord r;
  r.group = "dp";
  r.sig = {.seq = 1, .op = CollectiveOp::all_reduce_sum, .kind = ElemKind::f32, .elem_bytes = 4,
           .count = 10};
  for (int i = 0; i < 3; ++i) {
    recorder.enter(r);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    recorder.leave();
  }
  r.group = "fsdp";
  r.sig = {.seq = 1, .op = CollectiveOp::all_gather, .kind = ElemKind::raw, .elem_bytes = 2, .count = 8};
  recorder.enter(r);  // the issue of a non-blocking all-gather
  recorder.leave();
  r.waiting = true;
  recorder.enter(r);  // its wait: time, not another call
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  recorder.leave();
  const auto totals = recorder.totals();
  ASSERT_EQ(totals.size(), 2u);
  const CollectiveTotal& sum = totals.at({"dp", "all_reduce_sum"});
  EXPECT_EQ(sum.calls, 3);
  EXPECT_EQ(sum.bytes, 3 * 40);
  EXPECT_GE(sum.seconds, 0.03);
  const CollectiveTotal& gather = totals.at({"fsdp", "all_gather"});
  EXPECT_EQ(gather.calls, 1);
  EXPECT_EQ(gather.bytes, 16);
  EXPECT_GE(gather.seconds, 0.01);
  recorder.reset_totals();
  EXPECT_TRUE(recorder.totals().empty());
}

}  // namespace
