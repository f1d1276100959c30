// Communication overlap through the binary on real ranks: gradient buckets issued during the
// backward and every comm progress mode give the same run as one all-reduce after the backward
// (bit for bit: per element MPI sums the same values over the same ranks however the buffer is
// cut), on whole replicas (dp) and on the sharded model (fsdp x dp, cp x dp, pp x dp), with gradient
// accumulation; and the run's log says how its gradients were reduced.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mesh_runs.h"
#include "temp_dirs.h"

namespace {

using mt::testing::have_mpirun;
using mt::testing::losses;
using mt::testing::metric;
using mt::testing::run;
using mt::testing::train_command;
using mt::testing::weights;

const char* kRun =
    "--set train.steps=4 --set train.precision=fp32 --set train.peak_gflops=100 "
    "--set train.batch_size=8 --set train.seq_len=32 --set train.log_every=100 --set train.grad_accum=2 "
    "--set optim.warmup_steps=1 ";

struct Variant {
  std::string name, sets;
};

// Runs `mesh` once per variant and expects every variant's losses, gradient norms and final
// weights to equal the first's exactly.
void expect_identical_runs(const std::string& tag, const std::string& mesh, const std::vector<Variant>& variants,
                           const std::string& expect_in_log = "") {
  const std::string base = mt::testing::fresh_temp_dir("overlap_" + tag);
  std::vector<double> first_losses, first_norms;
  std::vector<float> first_weights;
  for (const Variant& v : variants) {
    const std::string dir = base + "/" + v.name;
    std::string out;
    ASSERT_EQ(run(train_command(mesh) + kRun + v.sets + " --set output.dir=" + dir, &out), 0) << v.name << out;
    if (&v == &variants.back() && !expect_in_log.empty()) {
      EXPECT_NE(out.find(expect_in_log), std::string::npos) << v.name << "\n" << out;
    }
    const auto l = losses(dir), n = metric(dir, "grad_norm");
    const auto w = weights(dir + "/model/model.safetensors");
    ASSERT_EQ(l.size(), 4u) << v.name;
    if (&v == &variants.front()) {
      first_losses = l, first_norms = n, first_weights = w;
      continue;
    }
    EXPECT_EQ(l, first_losses) << mesh << " " << v.name;
    EXPECT_EQ(n, first_norms) << mesh << " " << v.name;
    ASSERT_EQ(w.size(), first_weights.size());
    size_t differ = 0;
    for (size_t i = 0; i < w.size(); ++i) differ += w[i] != first_weights[i];
    EXPECT_EQ(differ, 0u) << mesh << " " << v.name << ": final weights differ from " << variants.front().name;
  }
}

// One all-reduce after the backward with only the waits moving it: what the engine did before
// overlap, the baseline every other variant must reproduce.
const Variant kBaseline{"one_allreduce_off", "--set train.dp_bucket_mb=0 --set train.comm_progress=off"};
// Buckets of 0.02 MB (5000 gradients): the tiny model's units make several.
const std::vector<Variant> kOverlapVariants = {
    kBaseline,
    {"buckets_off", "--set train.dp_bucket_mb=0.02 --set train.comm_progress=off"},
    {"buckets_ops", "--set train.dp_bucket_mb=0.02 --set train.comm_progress=ops"},
    {"buckets_thread", "--set train.dp_bucket_mb=0.02 --set train.comm_progress=thread"},
};

TEST(Overlap, BucketsAndProgressModesGiveTheSameDataParallelRun) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  expect_identical_runs("dp2", "dp=2", kOverlapVariants, "buckets of up to 0.02 MB, each all-reduced during the backward");
}

TEST(Overlap, BucketsGiveTheSameContextParallelRun) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  // The cp ranks hold blocks of the sharded model (fsdp x cp), not replicas: their partials are
  // summed by the reduce-scatters, and the dp replicas' buckets leave once those have landed.
  // (cp = 2 alone has no bucket to compare since issue 31 item 3.)
  expect_identical_runs("dp2_cp2", "dp=2,cp=2", {kBaseline, kOverlapVariants.back()},
                        "each all-reduced during the backward");
}

TEST(Overlap, BucketsGiveTheSameShardedRun) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  // fsdp x dp (HSDP): a unit's bucket leaves once its reduce-scatter has landed.
  expect_identical_runs("fsdp2_dp2", "dp=2,fsdp=2", {kBaseline, kOverlapVariants.back()},
                        "each all-reduced during the backward");
  // Pipeline stages, each with its own units' buckets.
  expect_identical_runs("pp2_dp2", "dp=2,pp=2", {kBaseline, kOverlapVariants.back()});
}

TEST(Overlap, LoraAdaptersBucketToo) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string lora = std::string(mt::testing::kLoraAllTargets);
  std::vector<Variant> variants;
  for (const Variant& v : {kBaseline, kOverlapVariants.back()})
    variants.push_back({v.name, v.sets + " " + lora + " --set train.dp_bucket_mb=0.0005"});
  variants.front().sets = kBaseline.sets + " " + lora;
  // The adapters are what is exported; compare them.
  const std::string base = mt::testing::fresh_temp_dir("overlap_lora");
  std::vector<std::vector<float>> w;
  std::vector<std::vector<double>> l;
  for (const Variant& v : variants) {
    std::string out;
    const std::string dir = base + "/" + v.name;
    ASSERT_EQ(run(train_command("dp=2") + kRun + v.sets + " --set output.dir=" + dir, &out), 0) << out;
    w.push_back(weights(dir + "/adapter/adapter_model.safetensors"));
    l.push_back(losses(dir));
  }
  EXPECT_EQ(l[0], l[1]);
  EXPECT_EQ(w[0], w[1]);
}

TEST(Overlap, AnUnknownProgressModeIsRefused) {
  std::string out;
  EXPECT_NE(run(train_command("") + kRun + "--set train.comm_progress=sometimes", &out), 0);
  EXPECT_NE(out.find("train.comm_progress"), std::string::npos) << out;
}

}  // namespace
