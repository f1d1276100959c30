// train.device_comm through the real binary on real MPI ranks: a run whose device buffers
// (gradients, FSDP shards and gathers, tp partial sums, pipeline activations) travel host-staged
// (StagedComm: copy_to_host -> MPI -> copy_from_host) equals, bit for bit, the run where MPI
// reads them in place; NCCL in a build without CUDA is one clear line before anything is written.
// The collectives themselves are compared with MpiComm's on a non-CPU device in
// tests/mpi/test_staged_comm.cpp.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "mesh_runs.h"
#include "temp_dirs.h"

namespace mt::testing {
namespace {

namespace fs = std::filesystem;

const char* kRun =
    "--set train.steps=4 --set train.precision=fp32 --set train.peak_gflops=100 "
    "--set train.batch_size=4 --set train.seq_len=32 --set train.log_every=100 "
    "--set train.grad_accum=2 --set optim.warmup_steps=1 ";

// The same run with device buffers through MPI in place and host-staged: equal losses, gradient
// norms and exported weights, exactly (staging copies bytes; it must not change a bit).
void expect_staged_equals_mpi(const std::string& tag, const std::string& mesh, const std::string& args,
                              const std::string& weights_file) {
  const std::string base = fresh_temp_dir("device_comm_" + tag);
  const std::string direct = base + "/mpi", staged = base + "/staged";
  std::string out_direct, out_staged;
  ASSERT_EQ(run(train_command(mesh) + args + "--set output.dir=" + direct, &out_direct), 0) << out_direct;
  ASSERT_EQ(run(train_command(mesh) + args + "--set train.device_comm=staged --set output.dir=" + staged,
                &out_staged), 0)
      << out_staged;
  EXPECT_NE(out_direct.find("device buffers travel by MPI, directly from host memory"), std::string::npos)
      << out_direct;
  EXPECT_NE(out_staged.find("device buffers travel by host-staged MPI (device -> host -> MPI -> device)"),
            std::string::npos)
      << out_staged;
  const auto a = losses(direct), b = losses(staged);
  ASSERT_EQ(a.size(), 4u);
  EXPECT_EQ(a, b) << mesh << ": losses";
  EXPECT_EQ(metric(direct, "grad_norm"), metric(staged, "grad_norm")) << mesh << ": gradient norms";
  const auto wa = weights(direct + weights_file), wb = weights(staged + weights_file);
  ASSERT_FALSE(wa.empty());
  EXPECT_TRUE(wa == wb) << mesh << ": exported weights differ";
}

TEST(DeviceComm, StagedFsdpTpAndDpRunEqualsMpiBitForBit) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  // fsdp gathers (bf16 shards, non-blocking) and reduce-scatters, tp partial sums (forward and
  // backward), the packed fsdp / tp gradient sums.
  expect_staged_equals_mpi("fsdp_tp", "fsdp=2,tp=2", kRun, "/model/model.safetensors");
}

TEST(DeviceComm, StagedPipelineAndReplicaRunEqualsMpiBitForBit) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  // Pipeline activations and their gradients (blocking receives, non-blocking sends), the dp
  // gradient all-reduce of replicas; LoRA, so the adapters' gradients are what travels.
  expect_staged_equals_mpi("pp_dp", "pp=2,dp=2",
                           std::string(kRun) + "--set lora.enabled=true --set lora.random_base=true "
                                               "--set lora.rank=4 --set optim.lr=1e-2 ",
                           "/adapter/adapter_model.safetensors");
}

#if !MESHTRAIN_CUDA
TEST(DeviceComm, NcclWithoutACudaBuildIsOneLineAndWritesNothing) {
  const std::string dir = fresh_temp_dir("device_comm_nccl") + "/run";
  std::string out;
  const int rc = run(train_command("") + kRun + "--set train.device_comm=nccl --set output.dir=" + dir + " 2>&1",
                     &out);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("train.device_comm = \"nccl\" needs a CUDA build (cmake -DMESHTRAIN_CUDA=ON)"),
            std::string::npos)
      << out;
  EXPECT_FALSE(fs::exists(dir)) << out;
}
#endif

TEST(DeviceComm, UnknownDeviceCommIsRefused) {
  std::string out;
  EXPECT_NE(run(train_command("") + kRun + "--set train.device_comm=gloo 2>&1", &out), 0);
  EXPECT_NE(out.find("train.device_comm"), std::string::npos) << out;
  EXPECT_NE(out.find("gloo"), std::string::npos) << out;
}

}  // namespace
}  // namespace mt::testing
