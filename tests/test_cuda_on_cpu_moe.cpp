// A mixture of experts trained whole on the GPU code (the CPU-executed CUDA build, docs/gpu.md
// "CUDA executed on the CPU"): one CUDA rank agrees with the CPU backend, and expert parallelism
// (ep=2: the rows exchanged between the ranks' device buffers, through the emulated NCCL's grouped
// sends and receives and through host-staged MPI) gives the one-rank CUDA run's losses and
// weights. Skipped in other builds.
#include <gtest/gtest.h>

#if MESHTRAIN_CUDA_ON_CPU
#include <fstream>
#include <string>

#include "cuda_on_cpu_runs.h"
#include "mesh_runs.h"
#include "moe_model_dir.h"

namespace mt::testing {
namespace {

const char* kRun = kCudaOnCpuRun;  // cuda_on_cpu_runs.h

// The tiny Qwen3-MoE model (4 experts, 2 a token, a dense layer among the sparse) as a config.
std::string moe_config(const std::string& tag) {
  const std::string dir = moe_model_dir("qwen3_moe", tag, [](ModelConfig& c) { c.mlp_only_layers = {1}; });
  std::ofstream(dir + ".toml") << "[model]\npath = \"" << dir << "\"\n";
  return "--config " + dir + ".toml ";
}

TEST(CudaOnCpuMoe, AgreesWithTheCpuBackend) {
  const std::string model = moe_config("cuda_moe_vs_cpu");
  expect_same_training("cuda_moe_vs_cpu", train_command(""), model + "--device cpu " + kRun, train_command(""),
                       model + "--device cuda " + kRun, "/model/model.safetensors", 1e-4);
}

class CudaOnCpuMoeMesh : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaOnCpuMoeMesh, ExpertParallelMatchesOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string tag = std::string("cuda_moe_ep_") + GetParam();
  const std::string args = moe_config(tag) + "--device cuda " + kRun;
  expect_same_training(tag, train_command(""), args, train_command("ep=2"),
                       args + "--set train.device_comm=" + GetParam() + " ", "/model/model.safetensors");
}

INSTANTIATE_TEST_SUITE_P(Comms, CudaOnCpuMoeMesh, ::testing::Values("nccl", "staged"));

}  // namespace
}  // namespace mt::testing

#else
TEST(CudaOnCpuMoe, Runs) { GTEST_SKIP() << "built without MESHTRAIN_CUDA_ON_CPU"; }
#endif
