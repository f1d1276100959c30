// Preference training through the binary: every mesh axis and their mixes equal the one-rank run
// (losses, validation losses, gradient norms and the exported weights, to the tolerances of
// expect_same_training), for LoRA (the reference: the base with the adapters off), QLoRA and full
// fine-tuning (the reference precomputed before the first step), each loss; and a resume across
// layouts continues the uninterrupted run.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "mesh_runs.h"
#include "preference_pairs_file.h"

namespace mt::testing {
namespace {

std::string preference_args(const std::string& method, bool lora) {
  std::string args = "--set train.method=" + method + " --set data.path=" + preference_pairs_file() +
                     " --set data.tokenizer=byte --set data.val_fraction=0.25 --set train.eval_every=3 "
                     "--set train.steps=6 --set train.precision=fp32 --set train.peak_gflops=100 "
                     "--set train.batch_size=8 --set train.seq_len=64 --set train.log_every=100 "
                     "--set optim.warmup_steps=2 --set optim.eps=1.0 --set optim.lr=0.5 --set preference.beta=0.5 ";
  if (lora) args += kLoraAllTargets;
  return args;
}

// One key of the metrics.jsonl lines that have it (the held-out pairs' metrics: evaluated steps).
std::vector<double> logged(const std::string& dir, const std::string& key) {
  std::vector<double> out;
  std::ifstream f(dir + "/metrics.jsonl");
  for (std::string line; std::getline(f, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains(key)) out.push_back(j[key].get<double>());
  }
  return out;
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

// Three rows a rank on dp = 2: the second pair's chosen on rank 0, its rejected on rank 1. The
// loss reads every rank's sums, so the step is still one rank's.
TEST(PreferenceMesh, APairSplitOverTwoRanksIsStillOnePair) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  expect_same_run("pref_split_pair", preference_args("dpo", true) + "--set train.batch_size=6 ", "dp=2",
                  "/adapter/adapter_model.safetensors", 1e-6);
}

// A validation set whose last batch the data-parallel ranks do not divide: 4 held-out pairs (8
// rows) in batches of 6 leave a batch of 2 rows for 3 ranks, shared out as plain validation's
// partial batch is (a row a rank, the third rank's a stand-in that counts nothing), where each
// rank ran it whole before. Two ranks cannot see one: the rows come in pairs, so every batch has
// an even number. The validation losses (before, during, after: expect_same_training) and the
// held-out pairs' metrics equal one rank's.
TEST(PreferenceMesh, APartialValidationBatchIsSharedOverTheRanksAndMatchesOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string tag = "pref_partial_validation";
  expect_same_run(tag, preference_args("dpo", true) + "--set train.batch_size=6 --set data.val_fraction=0.17 ", "dp=3",
                  "/adapter/adapter_model.safetensors", 1e-6);
  const std::string base = temp_dir_of("mesh_" + tag);
  for (const char* key : {"eval_rewards/chosen", "eval_rewards/margins", "eval_logps/rejected", "eval_pairs"}) {
    const auto one = logged(base + "/one", key), many = logged(base + "/mesh", key);
    ASSERT_EQ(one.size(), 2u) << key;  // steps 3 and 6
    ASSERT_EQ(many.size(), one.size()) << key;
    for (size_t i = 0; i < one.size(); ++i) EXPECT_NEAR(many[i], one[i], 1e-5 * (1.0 + std::abs(one[i]))) << key;
  }
  EXPECT_EQ(logged(base + "/one", "eval_pairs"), (std::vector<double>{4.0, 4.0}));
}

TEST(PreferenceMesh, QloraOnTensorParallelMatchesOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  // A width tp = 2 leaves whole NF4 blocks of (256 / 2 columns of down_proj).
  expect_same_run("pref_qlora_tp",
                  preference_args("dpo", true) + "--set lora.base_dtype=nf4 --set model.intermediate_size=256 ", "tp=2",
                  "/adapter/adapter_model.safetensors", 1e-6);
}

// lora.init_adapter (SFT, then DPO on the same adapter): each rank reads its blocks of the adapter
// it starts from, and a sharded, split run equals one rank's; an adapter of another shape is
// refused in one line.
TEST(PreferenceMesh, StartsFromAnAdapterOnEveryLayout) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string dir = fresh_temp_dir("pref_init_adapter");
  std::string out;
  ASSERT_EQ(run(train_command("") + preference_args("simpo", true) + "--set train.steps=2 --set output.dir=" + dir + "/first",
                &out), 0) << out;
  const std::string args = preference_args("dpo", true) + "--set lora.init_adapter=" + dir + "/first/adapter ";
  expect_same_run("pref_init_adapter_fsdp_tp", args, "fsdp=2,tp=2", "/adapter/adapter_model.safetensors", 1e-6);
  ASSERT_NE(run(train_command("") + args + "--set lora.rank=2 --set output.dir=" + dir + "/bad", &out), 0);
  EXPECT_NE(out.find("is an adapter of r = 4, alpha 16 on [down,gate,k,lm_head,o,q,up,v]: give lora.rank"),
            std::string::npos) << out;
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
