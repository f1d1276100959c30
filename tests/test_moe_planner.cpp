// The planner on a mixture of experts against the engine: the per-rank memory `meshtrain plan`
// predicts for a tiny Qwen3-MoE-like and Mixtral-like model (every layer sparse, as the published
// configs; k = 2 of 4 experts) in their HF layout, less its runtime overhead, is every rank's
// measured peak of tensor memory within 2%, on one rank, on fsdp = 2, on ep = 2 and on tp = 2 (full
// training of the Qwen3-MoE-like model; the others' bounds are in Case). The planner reads the
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
  // The bound on fsdp = 2 (one rank: 2% in every case). Two cases are not yet within 2% there and
  // are held to what they measured, so that a change is seen (docs/planner.md "Mixtures of
  // experts" lists them as open): the Mixtral-like model's fsdp = 2 peak is over-predicted by 2.8%
  // (not explained yet), and LoRA under fsdp = 2 under-predicted by 7.1% (measured 2026-12-06).
  // The LoRA shortfall is not the experts': with the adapters on q, k, v, o only it is the same,
  // and a dense model of the same shape, loaded from model.path the same way, falls short by as
  // much (one rank 2.1%, fsdp = 2 11%) — a gap of the planner's LoRA pricing on tiny models loaded
  // from a directory, to be looked at apart from the experts.
  double fsdp_tolerance;
  // The bound on ep = 2 (issue 32 item 8: the planner's ep-rank sizes against the engine's): 2%,
  // but LoRA's 3% (2.7% short, measured 2026-12-06: the same shortfall as on one rank, above).
  double ep_tolerance;
  // The bound on tp = 2 (expert tensor parallelism, with sequence parallelism): 2%, but the
  // Mixtral-like model's 3% (2.9% over, measured 2026-12-06: the same over-prediction as its
  // fsdp = 2; Qwen3-MoE-like full 1.1% over, LoRA 1.8% short).
  double tp_tolerance;
};

class MoePlanner : public ::testing::TestWithParam<Case> {};

TEST_P(MoePlanner, PerRankMemoryIsTheEnginesWithinTwoPercent) {
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
      EXPECT_NEAR(predicted / measured, 1.0,
                  mesh.empty()     ? 0.02
                  : mesh == "ep=2" ? GetParam().ep_tolerance
                  : mesh == "tp=2" ? GetParam().tp_tolerance
                                   : GetParam().fsdp_tolerance)
          << "predicted " << predicted << ", measured " << measured;
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
// At f = 1.5 (k = 2 of E = 4, 32 tokens a rank) an ep = 2 rank's experts hold 96 rows, not 128.
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
    EXPECT_NEAR(predicted / measured, 1.0, 0.02) << "predicted " << predicted << ", measured " << measured;
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

INSTANTIATE_TEST_SUITE_P(Families, MoePlanner,
                         ::testing::Values(Case{"qwen3_moe", "full", 0.02, 0.02, 0.02},
                                           Case{"mixtral", "full", 0.03, 0.02, 0.03},
                                           Case{"qwen3_moe", "lora", 0.08, 0.03, 0.02}),
                         [](const auto& info) { return std::string(info.param.family) + "_" + info.param.mode; });

}  // namespace
}  // namespace mt::testing
