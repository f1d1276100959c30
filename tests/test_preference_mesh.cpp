// Preference training through the binary: every mesh axis and their mixes equal the one-rank run
// (losses, validation losses, gradient norms and the exported weights, to the tolerances of
// expect_same_training), for LoRA (the reference: the base with the adapters off), QLoRA and full
// fine-tuning (the reference precomputed before the first step), each loss; and a resume across
// layouts continues the uninterrupted run.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "mesh_runs.h"

namespace mt::testing {
namespace {

// Short prompt / chosen / rejected pairs (byte-level tokens: every sequence under 64).
std::string pairs_file() {
  const std::string path = fresh_temp_dir("preference_pairs") + "/pairs.jsonl";
  std::ofstream f(path);
  const char* words[] = {"river", "baker", "mill", "bread", "green", "boat", "stars", "bell"};
  for (int i = 0; i < 24; ++i) {
    const std::string a = words[i % 8], b = words[(i * 3 + 1) % 8];
    f << R"({"prompt": "Q)" << i << " " << a << R"(? ", "chosen": "The )" << a << " is by the " << b
      << R"(.", "rejected": ")" << b << " " << b << R"(!"})" << "\n";
  }
  return path;
}

std::string preference_args(const std::string& method, bool lora) {
  std::string args = "--set train.method=" + method + " --set data.path=" + pairs_file() +
                     " --set data.tokenizer=byte --set data.val_fraction=0.25 --set train.eval_every=3 "
                     "--set train.steps=6 --set train.precision=fp32 --set train.peak_gflops=100 "
                     "--set train.batch_size=8 --set train.seq_len=64 --set train.log_every=100 "
                     "--set optim.warmup_steps=2 --set optim.eps=1.0 --set optim.lr=0.5 --set preference.beta=0.5 ";
  if (lora) args += kLoraAllTargets;
  return args;
}

struct MeshCase {
  const char* method;
  bool lora;
  const char* mesh;
};

class PreferenceMeshEquality : public ::testing::TestWithParam<MeshCase> {};

TEST_P(PreferenceMeshEquality, MatchesOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const MeshCase c = GetParam();
  // pp: two micro-batches, so the stages overlap.
  const std::string args = preference_args(c.method, c.lora) + "--set train.grad_accum=2 ";
  expect_same_run(std::string("pref_") + c.method + (c.lora ? "_lora_" : "_full_") + tag_of(c.mesh), args, c.mesh,
                  c.lora ? "/adapter/adapter_model.safetensors" : "/model/model.safetensors", c.lora ? 1e-6 : 5e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Meshes, PreferenceMeshEquality,
    ::testing::Values(MeshCase{"dpo", true, "dp=2"}, MeshCase{"dpo", true, "tp=2"}, MeshCase{"dpo", true, "fsdp=2,tp=2"},
                      MeshCase{"dpo", true, "pp=2"}, MeshCase{"dpo", true, "cp=2"}, MeshCase{"dpo", true, "dp=2,cp=2"},
                      MeshCase{"dpo", false, "fsdp=2"}, MeshCase{"dpo", false, "pp=2,tp=2"},
                      MeshCase{"ipo", true, "fsdp=2"}, MeshCase{"simpo", true, "tp=2,cp=2"},
                      MeshCase{"orpo", false, "dp=2,pp=2"}),
    [](const auto& info) {
      return std::string(info.param.method) + (info.param.lora ? "_lora_" : "_full_") + tag_of(info.param.mesh);
    });

TEST(PreferenceMesh, QloraOnTensorParallelMatchesOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  // A width tp = 2 leaves whole NF4 blocks of (256 / 2 columns of down_proj).
  expect_same_run("pref_qlora_tp",
                  preference_args("dpo", true) + "--set lora.base_dtype=nf4 --set model.intermediate_size=256 ", "tp=2",
                  "/adapter/adapter_model.safetensors", 1e-6);
}

TEST(PreferenceMesh, ResumesAcrossLayouts) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  // The adapters-off reference, and the precomputed one (read back from the run, not recomputed
  // from the trained model).
  expect_resume_across("pref_lora", preference_args("dpo", true), "dp=1", "fsdp=2");
  expect_resume_across("pref_full", preference_args("dpo", false), "tp=2", "dp=1");
}

}  // namespace
}  // namespace mt::testing
