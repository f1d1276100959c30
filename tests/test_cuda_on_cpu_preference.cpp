// Preference training on the GPU code (docs/gpu.md "CUDA executed on the CPU"): a DPO run with
// the adapters-off reference (per-token losses read back from the device, each row's gradient
// scaled through the cross-entropy kernels, the adapters' views bound off and on again) agrees
// with the CPU backend's, and on tp = 2 over the emulated NCCL (the vocabulary-parallel
// cross-entropy's row sums reduced for every weighted run of rows) with the single-rank CUDA run.
// Skipped in other builds.
#include <gtest/gtest.h>

#if MESHTRAIN_CUDA_ON_CPU
#include <string>

#include "cuda_on_cpu_runs.h"
#include "mesh_runs.h"
#include "preference_pairs_file.h"

namespace mt::testing {
namespace {

std::string dpo_run() {
  return std::string(kCudaOnCpuRun) + "--set train.method=dpo --set data.path=" + preference_pairs_file() +
         " --set data.tokenizer=byte --set data.val_fraction=0.25 --set train.batch_size=4 " + kLoraAllTargets;
}

TEST(CudaOnCpuPreference, DpoAgreesWithTheCpuBackend) {
  const std::string run = dpo_run();
  expect_same_training("cuda_dpo_vs_cpu", train_command(""), "--device cpu " + run, train_command(""),
                       "--device cuda " + run, "/adapter/adapter_model.safetensors", 1e-4);
}

TEST(CudaOnCpuPreference, DpoOnTensorParallelMatchesOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string run = "--device cuda " + dpo_run();
  expect_same_training("cuda_dpo_tp", train_command(""), run, train_command("tp=2"),
                       run + "--set train.device_comm=nccl ", "/adapter/adapter_model.safetensors");
}

}  // namespace
}  // namespace mt::testing

#else
TEST(CudaOnCpuPreference, Runs) { GTEST_SKIP() << "built without MESHTRAIN_CUDA_ON_CPU"; }
#endif
