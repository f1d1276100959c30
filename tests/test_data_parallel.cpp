// Data parallelism on real MPI ranks: `mpirun -n N meshtrain train --mesh dp=N` gives the same
// per-step losses and final parameters as the single-rank run (fp32, tight tolerance).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>
#include <string>
#include <sys/wait.h>
#include <vector>

#include "mesh_runs.h"
#include "train/checkpoint.h"
#include "train/run_config.h"

namespace {

namespace fs = std::filesystem;
using mt::testing::have_mpirun;
using mt::testing::losses;
using mt::testing::mpirun;
using mt::testing::run;

void expect_same_run(const std::string& tag, const std::string& args, int ranks,
                     const std::string& weights_file) {
  mt::testing::expect_same_run("dp_" + tag + std::to_string(ranks), args, "dp=" + std::to_string(ranks),
                               weights_file);
}

const char* kRun =
    "--set train.steps=6 --set train.precision=fp32 --set train.peak_gflops=100 "
    "--set train.batch_size=8 --set train.seq_len=64 --set train.log_every=100 "
    "--set optim.warmup_steps=2";

TEST(DataParallel, FullTrainingMatchesOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  expect_same_run("full", kRun, 2, "/model/model.safetensors");
  expect_same_run("full", kRun, 4, "/model/model.safetensors");
}

TEST(DataParallel, LoraTrainingMatchesOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  expect_same_run("lora", std::string(kRun) + " --set lora.enabled=true --set lora.rank=4", 2,
                  "/adapter/adapter_model.safetensors");
}

TEST(DataParallel, MeshThatDoesNotMatchTheWorldIsRefused) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  std::string out;
  EXPECT_NE(run(mpirun(3) + MESHTRAIN_BINARY + " train --mesh dp=2 " + kRun, &out), 0);
  EXPECT_NE(out.find("mesh dp=2 has 2 ranks but the world has 3"), std::string::npos) << out;
  EXPECT_NE(run(mpirun(2) + MESHTRAIN_BINARY + " train --mesh dp=2 " + kRun +
                " --set train.batch_size=3", &out), 0);
  EXPECT_NE(out.find("divisible"), std::string::npos) << out;
}

TEST(DataParallel, CheckpointFromOneRankResumesUnderDp2) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string dir = (fs::temp_directory_path() / "meshtrain_dp_resume").string();
  fs::remove_all(dir);
  const std::string args = std::string(kRun) + " --set output.checkpoint_every=3 --set output.dir=" + dir;
  std::string out;
  ASSERT_EQ(run("OMP_NUM_THREADS=1 " + std::string(MESHTRAIN_BINARY) + " train " + args, &out), 0) << out;
  const auto full = losses(dir);
  ASSERT_EQ(full.size(), 6u);
  fs::remove_all(dir + "/checkpoints/step-000006");
  fs::remove(dir + "/checkpoints/latest");  // the newest complete one is then step 3
  ASSERT_EQ(run(mpirun(2) + MESHTRAIN_BINARY + " train --mesh dp=2 " + args +
                " --set train.resume=latest", &out), 0) << out;
  EXPECT_NE(out.find("resumed from"), std::string::npos) << out;
  const auto all = losses(dir);  // appended: 6 uninterrupted, then steps 4..6 again under dp=2
  ASSERT_EQ(all.size(), 9u);
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(all[6 + i], full[3 + i], 1e-5 * full[3 + i]) << i;
}

TEST(DataParallel, KilledRankEndsTheJobAndTheLastCheckpointLoads) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string dir = (fs::temp_directory_path() / "meshtrain_dp_killed").string();
  fs::remove_all(dir);
  const std::string args = std::string(kRun) +
                           " --set train.steps=100000 --set output.checkpoint_every=2 --set output.dir=" + dir;
  // Run in the background; once a checkpoint exists, kill one rank with SIGKILL, then wait (at
  // most 30 s) for the job to end.
  const std::string script_path = dir + ".sh";
  std::ofstream(script_path)
      << "(" << mpirun(2) << MESHTRAIN_BINARY << " train --mesh dp=2 " << args << " > " << dir
      << ".log 2>&1; echo $? > " << dir << ".rc) &\n"
      << "for i in $(seq 1 600); do [ -f " << dir << "/checkpoints/latest ] && break; sleep 0.1; done\n"
      << "pkill -9 -n -f 'output.dir=" << dir << "$'\n"
      << "for i in $(seq 1 300); do [ -f " << dir << ".rc ] && break; sleep 0.1; done\n";
  fs::remove(dir + ".rc");
  run("bash " + script_path);
  ASSERT_TRUE(fs::exists(dir + ".rc")) << "the job did not end within 30 s of losing a rank";
  std::ifstream rc_file(dir + ".rc");
  int rc = 0;
  rc_file >> rc;
  EXPECT_NE(rc, 0);
  std::ifstream log_file(dir + ".log");
  std::stringstream log;
  log << log_file.rdbuf();
  EXPECT_NE(log.str().find("signal 9"), std::string::npos) << log.str();
  // The newest complete checkpoint loads into a model of the run's shape.
  mt::RunConfig cfg = mt::parse_run_config(mt::default_run_config_toml(), {}, "<test>");
  mt::LlamaModel model(cfg.model, mt::Precision::fp32, mt::LoraConfig{});
  mt::AdamW opt(model.trainable(), cfg.optim);
  const mt::CheckpointState st = mt::load_checkpoint(mt::resolve_checkpoint("latest", dir), model, opt);
  EXPECT_GE(st.step, 2);
  EXPECT_EQ(st.step % 2, 0);
}

}  // namespace
