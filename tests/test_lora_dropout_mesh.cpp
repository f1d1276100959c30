// LoRA dropout on a mesh draws the masks one device draws (rows counted in the step's global
// batch, columns by their global index under tp, tokens by their true position in the sequence
// under cp), so a mesh run equals the one-rank run to the
// rounding of its sums: losses and gradient norms as test_sharded.cpp's MeshEquality, and, with
// AdamW's eps = 1 making each update linear in the gradient (nothing amplifies rounding), the
// adapters to 1e-6, the sharp check of Sharded.WeightsAgreeToRoundingWhenUpdatesAreLinearInTheGradient.
// One mask drawn differently anywhere would move both far more.
#include <gtest/gtest.h>

#include <string>

#include "mesh_runs.h"

namespace mt::testing {
namespace {

const char* kDropoutRun =
    "--set train.steps=6 --set train.precision=fp32 --set train.peak_gflops=100 "
    "--set train.batch_size=8 --set train.seq_len=64 --set train.log_every=100 --set optim.warmup_steps=2 "
    "--set lora.enabled=true --set lora.random_base=true --set lora.rank=4 "
    "--set 'lora.targets=[\"q\",\"k\",\"v\",\"o\",\"gate\",\"up\",\"down\",\"lm_head\"]' "
    "--set lora.dropout=0.3 --set optim.eps=1.0 --set optim.lr=0.5 ";

class DropoutMeshEquality : public ::testing::TestWithParam<const char*> {};

TEST_P(DropoutMeshEquality, LoraDropoutTrainingMatchesOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  std::string tag = GetParam();
  for (char& c : tag)
    if (c == '=' || c == ',') c = '_';
  // pp: two micro-batches, so the pipeline's stages overlap (the rows of the second start at 8).
  expect_same_run("dropout_" + tag, std::string(kDropoutRun) + "--set train.grad_accum=2 ", GetParam(),
                  "/adapter/adapter_model.safetensors", 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Meshes, DropoutMeshEquality, ::testing::Values("dp=2", "tp=2", "fsdp=2,tp=2", "pp=2", "cp=2", "cp=4",
                                                                    "dp=2,cp=2"),
                         [](const auto& info) {
                           std::string t = info.param;
                           for (char& c : t)
                             if (c == '=' || c == ',') c = '_';
                           return t;
                         });

}  // namespace
}  // namespace mt::testing
