// Whole runs of the binary with --device cuda in the CPU-executed CUDA build (docs/gpu.md "CUDA
// executed on the CPU"): two identical runs give the same bits, a run agrees with the CPU
// backend's, and every mesh axis and a 4-rank mix give the single-rank CUDA run's losses and
// weights, with NCCL and with host-staged MPI collectives — the mesh tests' standard
// (mesh_runs.h), on the GPU code. Shapes are tiny: the emulator runs every GPU thread as a fiber.
// Skipped in other builds.
#include <gtest/gtest.h>

#if MESHTRAIN_CUDA_ON_CPU
#include <filesystem>
#include <string>
#include <vector>

#include "cuda_on_cpu_runs.h"
#include "mesh_runs.h"
#include "text_files.h"

namespace mt::testing {
namespace {

// The built-in tiny model's run (cuda_on_cpu_runs.h).
const char* kRun = kCudaOnCpuRun;

const std::string kCudaRun = std::string("--device cuda ") + kRun;

std::string cuda_one_rank() { return train_command(""); }

TEST(CudaOnCpuTraining, TwoIdenticalRunsAreBitForBit) {
  const std::string base = fresh_temp_dir("cuda_repeat");
  std::string out;
  for (const char* run_name : {"/a", "/b"})
    ASSERT_EQ(run(cuda_one_rank() + kCudaRun + "--set train.precision=bf16 " + kLoraAllTargets +
                      "--set output.dir=" + base + run_name, &out), 0) << out;
  EXPECT_EQ(read_file(base + "/a/adapter/adapter_model.safetensors"),
            read_file(base + "/b/adapter/adapter_model.safetensors"));
  EXPECT_EQ(losses(base + "/a"), losses(base + "/b"));
}

TEST(CudaOnCpuTraining, AgreesWithTheCpuBackend) {
  // The CUDA run on one rank against the CPU backend's run: same losses and weights to f32
  // rounding (the two sum in different orders).
  expect_same_training("cuda_vs_cpu", cuda_one_rank(), std::string("--device cpu ") + kRun,
                       cuda_one_rank(), kCudaRun, "/model/model.safetensors", 1e-4);
}

struct MeshCase {
  const char* mesh;
  const char* comm;  // train.device_comm
};

class CudaOnCpuMesh : public ::testing::TestWithParam<MeshCase> {};

TEST_P(CudaOnCpuMesh, MatchesOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const MeshCase c = GetParam();
  const std::string args = kCudaRun + "--set train.device_comm=" + c.comm + " ";
  expect_same_training(std::string("cuda_") + c.comm + "_" + tag_of(c.mesh), cuda_one_rank(), kCudaRun,
                       train_command(c.mesh), args, "/model/model.safetensors");
}

// Every axis and a 4-rank mix over the emulated NCCL; the host-staged twin (the same code on
// every backend, tested bit for bit against MPI on the CPU: test_device_comm.cpp) on one axis, on
// a mix of pipeline and tensor parallelism, and on cp (its non-blocking gathers and reduce-scatters
// of device buffers that the stream writes before and after).
INSTANTIATE_TEST_SUITE_P(
    Meshes, CudaOnCpuMesh,
    ::testing::Values(MeshCase{"dp=2", "nccl"}, MeshCase{"fsdp=2", "nccl"}, MeshCase{"tp=2", "nccl"},
                      MeshCase{"pp=2", "nccl"}, MeshCase{"cp=2", "nccl"}, MeshCase{"fsdp=2,tp=2", "nccl"},
                      MeshCase{"dp=2", "staged"}, MeshCase{"pp=2,tp=2", "staged"}, MeshCase{"cp=2", "staged"}),
    [](const auto& info) { return std::string(info.param.comm) + "_" + tag_of(info.param.mesh); });

// LoRA on every target, the head included, sharded and split (the adapters' gathers and sums).
class CudaOnCpuLoraMesh : public ::testing::TestWithParam<MeshCase> {};

TEST_P(CudaOnCpuLoraMesh, MatchesOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const MeshCase c = GetParam();
  const std::string lora = kCudaRun + kLoraAllTargets;
  expect_same_training(std::string("cuda_lora_") + c.comm + "_" + tag_of(c.mesh), cuda_one_rank(), lora,
                       train_command(c.mesh), lora + "--set train.device_comm=" + c.comm + " ",
                       "/adapter/adapter_model.safetensors");
}

INSTANTIATE_TEST_SUITE_P(Meshes, CudaOnCpuLoraMesh,
                         ::testing::Values(MeshCase{"fsdp=2,tp=2", "nccl"}),
                         [](const auto& info) {
                           return std::string(info.param.comm) + "_" + tag_of(info.param.mesh);
                         });

}  // namespace
}  // namespace mt::testing

#else
TEST(CudaOnCpuTraining, Runs) { GTEST_SKIP() << "built without MESHTRAIN_CUDA_ON_CPU"; }
#endif
