// The planner on a mixture of experts against the engine: the per-rank memory `meshtrain plan`
// predicts for a tiny Qwen3-MoE-like and Mixtral-like model (every layer sparse, as the published
// configs; k = 2 of 4 experts) in their HF layout, less its runtime overhead, is every rank's
// measured peak of tensor memory within 1%, on one rank, on fsdp = 2, on ep = 2, on tp = 2 and on
// fsdp = 2 x ep = 2 (4 ranks), in full training and LoRA on every expert. The planner reads the
// engine's own sizes (model/block.h block_activation_sizes and block_scratch_elems, which count the
// experts' saved rows and scratch, model/moe.h) and the trainer's partition rules for the experts.
#include <gtest/gtest.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "mesh_runs.h"
#include "moe_model_dir.h"

namespace mt::testing {
namespace {

struct Case {
  const char* family;
  const char* mode;  // "full" or "lora"
};

// Every case on one rank, fsdp = 2, ep = 2 and tp = 2 within 1% (measured 2026-12-07: within
// 0.15% but tp's, see docs/planner.md "Mixtures of experts"). Until then the Mixtral-like model's
// fsdp = 2 peak was over-predicted by 2.8% (the planner priced the reduce-scatter's receive as a
// block of its own: it lands in the one the unit's weights hand back) and LoRA's under by 7.1%
// (the embedding's gather blocks, which no larger request can take, and the send staging of units
// whose base and adapters lie in two stores, were not priced; nor the CPU attention kernels'
// scratch): the planner now replays the pool's requests with its own rule (plan/gather_pool.h).
constexpr double kTolerance = 0.01;

class MoePlanner : public ::testing::TestWithParam<Case> {};

TEST_P(MoePlanner, PerRankMemoryIsTheEnginesWithinOnePercent) {
  const std::string family = GetParam().family;
  const bool lora = std::string(GetParam().mode) == "lora";
  const std::string tag = "moe_plan_" + family + "_" + GetParam().mode;
  const std::string model = moe_model_dir(family, tag);
  const std::string train_lora =
      lora ? "--set lora.enabled=true --set lora.rank=4 "
             "--set 'lora.targets=[\"q\",\"k\",\"v\",\"o\",\"gate\",\"up\",\"down\"]' "
           : "";
  const std::string plan_lora = lora ? "--mode lora --lora-rank 4 --lora-targets q,k,v,o,gate,up,down " : "";
  for (const std::string mesh : {"", "fsdp=2", "ep=2", "tp=2"}) {
    if (!mesh.empty() && !have_mpirun()) GTEST_SKIP() << "mpirun not installed";
    SCOPED_TRACE(mesh.empty() ? "one rank" : mesh);
    const std::string dir = fresh_temp_dir(tag + "_" + (mesh.empty() ? "one" : tag_of(mesh))) + "/run";
    const bool batch_split = mesh == "fsdp=2" || mesh == "ep=2";  // tp's ranks share a micro-batch
    const RunAndPlan r = train_then_plan(
        train_command(mesh) + "--set model.path=" + model + " " + train_lora +
            "--set train.seq_len=32 --set train.batch_size=2 --set train.grad_accum=2 --set train.precision=bf16 "
            "--set train.steps=2 --set train.peak_gflops=100",
        dir,
        std::string(MESHTRAIN_BINARY) + " plan --model " + model + " --cluster cpu --mesh " +
            (mesh.empty() ? std::string("dp=1") : mesh) + " " + plan_lora + "--seq 32 --global-batch 4 " +
            // train.batch_size rows a micro-batch, split over fsdp (or ep): 1 row a rank on 2 ranks
            (batch_split ? "--micro-batch 1" : "--micro-batch 2"));
    const auto& m = r.plan.at("memory_bytes");
    const double predicted = m.at("total").get<double>() - m.at("items").value("overhead", 0.0);
    const auto& ranks = r.summary.at("memory_per_rank");
    ASSERT_EQ(ranks.size(), mesh.empty() ? 1u : 2u);
    for (const auto& rank : ranks) {
      const double measured = double(rank.at("peak_tensor_bytes").get<int64_t>());
      EXPECT_NEAR(predicted / measured, 1.0, kTolerance) << "predicted " << predicted << ", measured " << measured;
      std::cout << family << " " << GetParam().mode << " " << (mesh.empty() ? "one rank" : mesh) << ": predicted "
                << predicted << ", measured " << measured << " (" << predicted / measured << ")\n";
    }
    // The experts' bytes on a rank: half of them on 2 ranks, split over fsdp or tp like any tensor
    // or held whole by one ep rank each.
    const auto& e = r.plan.at("experts");
    EXPECT_DOUBLE_EQ(e.at("bytes_per_rank").get<double>() * (mesh.empty() ? 1.0 : 2.0),
                     e.at("bytes_total").get<double>());
  }
}

// train.moe_capacity_factor under ep: each rank keeps at most ceil(f N k / E) of its choices for an
// expert, so an ep rank receives at most E times that (model/moe.h moe_expert_rows), not ep x its
// own N k: its activations shrink, and `plan --moe-capacity-factor` prices what the engine holds.
// At f = 1.5 (k = 2 of E = 4, 32 tokens a rank) an ep = 2 rank's experts hold 96 rows, not 128
// (plan / measured peak 1.0065, 2026-12-07).
TEST(MoePlannerCapacity, AnEpRanksExpertRowsUnderACapacityFactorAreTheEngines) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string tag = "moe_plan_capacity";
  const std::string model = moe_model_dir("qwen3_moe", tag);
  const std::string dir = fresh_temp_dir(tag + "_ep_2") + "/run";
  const std::string plan = std::string(MESHTRAIN_BINARY) + " plan --model " + model +
                           " --cluster cpu --mesh ep=2 --seq 32 --global-batch 4 --micro-batch 1";
  const RunAndPlan r = train_then_plan(
      train_command("ep=2") + "--set model.path=" + model +
          " --set train.seq_len=32 --set train.batch_size=2 --set train.grad_accum=2 --set train.precision=bf16 "
          "--set train.steps=2 --set train.peak_gflops=100 --set train.moe_capacity_factor=1.5",
      dir, plan + " --moe-capacity-factor 1.5 --moe-imbalance 4");
  const auto& m = r.plan.at("memory_bytes");
  const double predicted = m.at("total").get<double>() - m.at("items").value("overhead", 0.0);
  for (const auto& rank : r.summary.at("memory_per_rank")) {
    const double measured = double(rank.at("peak_tensor_bytes").get<int64_t>());
    EXPECT_NEAR(predicted / measured, 1.0, kTolerance) << "predicted " << predicted << ", measured " << measured;
  }
  EXPECT_DOUBLE_EQ(r.plan.at("experts").at("capacity_factor").get<double>(), 1.5);
  // The busiest rank's share is capped too: 96 rows over the mean 64, not the 4 asked.
  EXPECT_DOUBLE_EQ(r.plan.at("experts").at("imbalance").get<double>(), 1.5);
  // Dropless, the same plan holds more activations.
  std::string out;
  ASSERT_EQ(run(plan + " --moe-imbalance 4 --json 2>&1", &out), 0) << out;
  const nlohmann::json dropless = nlohmann::json::parse(out);
  EXPECT_GT(dropless.at("memory_bytes").at("items").at("activations").get<double>(),
            m.at("items").at("activations").get<double>());
  EXPECT_DOUBLE_EQ(dropless.at("experts").at("imbalance").get<double>(), 4.0);
  ASSERT_NE(run(std::string(MESHTRAIN_BINARY) + " plan --model llama3-8b --mesh dp=1 --moe-capacity-factor 1.5 2>&1", &out), 0);
  EXPECT_NE(out.find("--moe-capacity-factor caps a mixture of experts' experts"), std::string::npos) << out;
}

// fsdp x ep on 4 ranks (issue 32 item 8): each rank gathers its fsdp units of its ep rank's experts
// and sums the non-expert gradients over ep in a block of the same pool. Batches of 4 rows, 1 a
// rank; the held-out set's 31 rows end in a batch of 3, which every rank once ran whole (3 rows'
// activations: the peak was 27% over the plan); now a rank runs 1 of them (or a stand-in row).
TEST(MoePlannerFsdpEp, FourRanksPeakIsTheEngines) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string tag = "moe_plan_fsdp_ep";
  const std::string model = moe_model_dir("qwen3_moe", tag);
  const std::string dir = fresh_temp_dir(tag + "_run") + "/run";
  const RunAndPlan r = train_then_plan(
      train_command("fsdp=2,ep=2") + "--set model.path=" + model +
          " --set train.seq_len=32 --set train.batch_size=4 --set train.grad_accum=2 --set train.precision=bf16 "
          "--set train.steps=2 --set train.peak_gflops=100",
      dir,
      std::string(MESHTRAIN_BINARY) + " plan --model " + model +
          " --cluster cpu --mesh fsdp=2,ep=2 --seq 32 --global-batch 8 --micro-batch 1");
  const auto& m = r.plan.at("memory_bytes");
  const double predicted = m.at("total").get<double>() - m.at("items").value("overhead", 0.0);
  const auto& ranks = r.summary.at("memory_per_rank");
  ASSERT_EQ(ranks.size(), 4u);
  for (const auto& rank : ranks) {
    const double measured = double(rank.at("peak_tensor_bytes").get<int64_t>());
    EXPECT_NEAR(predicted / measured, 1.0, kTolerance) << "predicted " << predicted << ", measured " << measured;
    std::cout << "qwen3_moe full fsdp=2,ep=2: predicted " << predicted << ", measured " << measured << " ("
              << predicted / measured << ")\n";
  }
  // The ep sum's block is one the gathers' blocks cannot hold here: priced apart.
  EXPECT_GT(m.at("items").at("ep gradient sum").get<double>(), 0.0);
}

INSTANTIATE_TEST_SUITE_P(Families, MoePlanner,
                         ::testing::Values(Case{"qwen3_moe", "full"}, Case{"mixtral", "full"},
                                           Case{"qwen3_moe", "lora"}),
                         [](const auto& info) { return std::string(info.param.family) + "_" + info.param.mode; });

}  // namespace
}  // namespace mt::testing
