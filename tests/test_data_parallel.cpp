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
#include <unistd.h>
#include <vector>

#include "mesh_runs.h"
#include "train/checkpoint.h"
#include "train/run_config.h"
#include "temp_dirs.h"

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
  expect_same_run("full", std::string(kRun) + " --set train.eval_every=2", 2, "/model/model.safetensors");
  expect_same_run("full", kRun, 4, "/model/model.safetensors");
}

TEST(DataParallel, LoraTrainingMatchesOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  expect_same_run("lora", std::string(kRun) + " --set lora.enabled=true --set lora.random_base=true --set lora.rank=4", 2,
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
  const std::string dir = mt::testing::fresh_temp_dir("dp_resume") + "/run";
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
  const auto all = losses(dir);  // cut to steps 1..3 at the resume, then steps 4..6 under dp=2
  ASSERT_EQ(all.size(), 6u);
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(all[3 + i], full[3 + i], 1e-5 * full[3 + i]) << i;
}

// Rank 0 prints every rank's node and local rank as the launcher gave them (OMPI_COMM_WORLD_* here;
// srun's SLURM_* in scripts/slurm_test.sh).
TEST(DataParallel, RankZeroSaysWhereEveryRankRuns) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string dir = mt::testing::fresh_temp_dir("dp_world") + "/run";
  std::string out;
  ASSERT_EQ(run(mpirun(2) + MESHTRAIN_BINARY + " train --mesh dp=2 " + kRun +
                " --set output.dir=" + dir, &out), 0) << out;
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof host - 1), 0);
  EXPECT_NE(out.find("world: 2 ranks on 1 node, placed by mpirun (OMPI_COMM_WORLD_RANK, "
                     "OMPI_COMM_WORLD_SIZE): " + std::string(host) + " runs ranks 0,1 (local 0,1)\n"),
            std::string::npos)
      << out;
}

TEST(DataParallel, KilledRankEndsTheJobAndTheLastCheckpointLoads) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  mt::testing::expect_killed_rank_ends_job("dp", kRun, "dp=2");
}

}  // namespace
