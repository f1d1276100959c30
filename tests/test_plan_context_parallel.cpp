// The planner's context parallelism (issue 22 item 4, issue 31 item 3): a cp rank's memory (its
// seq / cp tokens of activations, parameters sharded over fsdp x cp, the K/V exchange buffers)
// against the measured peak of real cp=2, cp=4 and fsdp2 x cp2 runs; the time model's K/V traffic
// on the cp group's link, attention work split over the cp ranks, the gathers and reduce-scatters
// over fsdp x cp and no cp gradient all-reduce; the search trying cp and picking it only for a
// sequence that needs it; `meshtrain plan --mesh ...,cp=N` and its refusals.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "error_of.h"
#include "io/family_presets.h"
#include "mesh_runs.h"
#include "plan/collectives.h"
#include "plan/search.h"
#include "temp_dirs.h"
#include "text_files.h"

namespace mt::testing {
namespace {

namespace fs = std::filesystem;
using plan::PlanInput;

// Llama 3.1 8B on one node of 8 x H100, full training, bf16, one sequence of `seq` tokens a step.
PlanInput llama8b(int64_t seq, const parallel::MeshShape& mesh) {
  PlanInput in;
  in.model = plan::model_preset("llama3-8b");
  in.cluster = plan::cluster_preset("dgx-h100");
  in.seq = seq, in.global_batch = mesh.dp * mesh.fsdp, in.micro_batch = 1;
  in.mesh = mesh;
  return in;
}

parallel::MeshShape mesh_of(const std::string& text) { return parallel::MeshShape::parse(text); }

TEST(PlanContextParallelMemory, ARankHoldsItsShareOfTheTokensAndOfTheParameters) {
  const PlanInput cp = llama8b(32768, mesh_of("tp=2,cp=4"));
  // An fsdp rank of the same tokens a rank (a row of seq / cp), over as many shards.
  const PlanInput share = llama8b(32768 / 4, mesh_of("fsdp=4,tp=2"));
  const plan::MemoryBreakdown a = plan::peak_memory(cp), b = plan::peak_memory(share);
  // Parameters, gradients and optimizer state are sharded over fsdp x cp (torchtitan's layout): the
  // state of tp=2 x cp=4 is that of tp=2 x fsdp=4, a quarter of tp=2's but for the norms (not split).
  const plan::MemoryBreakdown unsharded = plan::peak_memory(llama8b(32768 / 4, mesh_of("tp=2")));
  for (const char* item : {"weights", "grads", "master", "optimizer"}) {
    EXPECT_EQ(a.item(item), b.item(item)) << item;
    EXPECT_NEAR(a.item(item) / unsharded.item(item), 0.25, 0.001) << item;
  }
  // Activations of seq / cp tokens, the same as one rank with that sequence.
  EXPECT_EQ(a.item("activations"), b.item("activations"));
  // The exchange: the whole row's K (and V: 512 wide at tp=2, 4 of the 8 KV heads of 128; 32768
  // tokens), K, V and the gather staging in bf16, their gradients in f32 (summed over the ranks
  // before one rounding), the f32 send staging of the reduce-scatter, and its f32 receive of a
  // rank's share.
  const double whole = 32768.0 * 512.0, mine = whole / 4.0;
  EXPECT_DOUBLE_EQ(a.item("cp K/V exchange"), whole * (3 * 2 + 3 * 4) + 4 * mine);
  EXPECT_DOUBLE_EQ(plan::cp_exchange_bytes(cp), a.item("cp K/V exchange"));
  EXPECT_EQ(b.item("cp K/V exchange"), 0.0);
  // The gathers of fsdp x cp are fsdp's; no gradient bucket is staged: the cp ranks are no
  // replicas (their partials are summed by the reduce-scatters), and there is no dp.
  EXPECT_EQ(a.item("comm buffers"), b.item("comm buffers"));
  EXPECT_GT(a.item("comm buffers"), unsharded.item("comm buffers"));  // the gathers' buffers
  EXPECT_NEAR(a.total, b.total + a.item("cp K/V exchange"), 1e-9 * a.total);
}

// `meshtrain train` on `mesh`, then `meshtrain plan` for the same run from the model it wrote.
RunAndPlan run_and_plan(const std::string& mesh, const std::string& shape, const std::string& plan_shape) {
  std::string tag = mesh;
  for (char& ch : tag)
    if (ch == '=' || ch == ',') ch = '_';
  const std::string dir = fresh_temp_dir("plan_cp_memory_" + tag) + "/run";
  return train_then_plan(train_command(mesh) + shape + " --set train.steps=2 --set train.peak_gflops=100", dir,
                         std::string(MESHTRAIN_BINARY) + " plan --model " + dir + "/model --cluster cpu --mesh " + mesh +
                             " " + plan_shape);
}

// Issue 22 item 4 and issue 31 item 3: the planner's per-rank figure (less its runtime overhead,
// which the tensor peak does not see) is every cp rank's measured peak of tensor memory within 2%,
// at cp = 2 and 4, alone, beside tensor parallelism and beside fsdp, with the parameter state
// sharded over fsdp x cp. The state the sharding saves is more than 4% of the figure each time, so
// a rank that kept the state replicated over cp would fail here.
TEST(PlanContextParallelMemory, PlannersPeakIsTheMeasuredWithinTwoPercent) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string shape =
      "--set train.seq_len=512 --set model.max_position_embeddings=512 --set train.batch_size=2 "
      "--set train.grad_accum=2";
  for (const char* mesh : {"cp=2", "cp=4", "cp=2,tp=2", "fsdp=2,cp=2"}) {
    const parallel::MeshShape m = mesh_of(mesh);
    const std::string plan_shape = "--seq 512 --micro-batch " + std::to_string(2 / m.fsdp) + " --global-batch 4";
    const RunAndPlan r = run_and_plan(mesh, shape, plan_shape);
    const auto& m_items = r.plan.at("memory_bytes").at("items");
    ASSERT_GT(m_items.value("cp K/V exchange", 0.0), 0.0) << mesh;
    const double predicted = r.plan.at("memory_bytes").at("total").get<double>() - m_items.value("overhead", 0.0);
    double state = 0.0;
    for (const char* item : {"weights", "grads", "master", "optimizer"}) state += m_items.value(item, 0.0);
    EXPECT_GT(state * double(m.cp - 1), 0.04 * predicted) << mesh << ": too little state for the test to see cp's share";
    const auto& ranks = r.summary.at("memory_per_rank");
    ASSERT_EQ(int64_t(ranks.size()), m.world()) << mesh;
    for (const auto& rank : ranks) {
      const double measured = double(rank.at("peak_tensor_bytes").get<int64_t>());
      EXPECT_NEAR(predicted / measured, 1.0, 0.02)
          << mesh << " rank " << rank.at("rank") << ": predicted " << predicted << ", measured " << measured;
    }
  }
}

TEST(PlanContextParallelTime, KvTrafficOnTheCpLinkAndAttentionSplitOverTheRanks) {
  const PlanInput cp1 = llama8b(65536, mesh_of("tp=8")), cp2_intra = llama8b(65536, mesh_of("cp=2,tp=4"));
  const PlanInput cp2_inter = llama8b(65536, mesh_of("cp=2,tp=8"));
  const plan::TimeBreakdown t1 = plan::step_time(cp1), t_intra = plan::step_time(cp2_intra);
  const plan::TimeBreakdown t_inter = plan::step_time(cp2_inter);
  EXPECT_EQ(t1.cp, 0.0);
  // cp x tp = 8 fits a node of 8: the NVLink; 16 spans two: the slower inter-node link.
  const plan::Cluster& c = cp1.cluster;
  EXPECT_EQ(plan::axis_link(cp2_intra.mesh, parallel::Axis::cp, c).bandwidth, c.intra.bandwidth * c.link_efficiency);
  EXPECT_EQ(plan::axis_link(cp2_inter.mesh, parallel::Axis::cp, c).bandwidth, c.inter.bandwidth * c.link_efficiency);
  // One forward's all-gather of K and V and the backward's again, dK and dV reduce-scattered in
  // f32, per layer; no overlap, so all of it is in the step.
  const plan::Link intra = plan::axis_link(cp2_intra.mesh, parallel::Axis::cp, c);
  const double whole = 65536.0 * 256.0;  // K (or V) of the row at tp=4: 2 of the 8 KV heads of 128
  const double per_layer = 2.0 * 2.0 * plan::ring_all_gather(2.0 * whole, 2, intra) +
                           2.0 * plan::ring_reduce_scatter(4.0 * whole, 2, intra);
  EXPECT_NEAR(t_intra.cp, 32.0 * per_layer, 1e-9 * t_intra.cp);
  EXPECT_GT(t_inter.cp, t_intra.cp);
  EXPECT_NEAR(t_intra.step - t_intra.compute - t_intra.tp - t_intra.fsdp_exposed - t_intra.dp_exposed -
                  t_intra.optimizer - t_intra.cp,
              0.0, 1e-9 * t_intra.step);
  // Each cp rank does half of the row's work (zig-zag: half the causal attention too): cp=2 x tp=8
  // on 16 devices computes each step in about half of tp=8's time.
  EXPECT_NEAR(t_inter.compute / t1.compute, 0.5, 0.01);
  // Gradients summed over the cp ranks (each saw other tokens) by the reduce-scatters over fsdp x
  // cp, as fsdp's are (the same bytes, on the same link: the group spans fsdp's ranks): no dp
  // all-reduce is left.
  EXPECT_EQ(t1.dp, 0.0);
  EXPECT_EQ(t1.fsdp, 0.0);
  EXPECT_EQ(t_inter.dp, 0.0);
  EXPECT_GT(t_inter.fsdp, 0.0);
  EXPECT_DOUBLE_EQ(t_inter.fsdp, plan::step_time(llama8b(65536, mesh_of("fsdp=2,tp=8"))).fsdp);
  // With dp, the dp all-reduce is over dp alone: dp=2 x cp=2's is dp=2's.
  EXPECT_DOUBLE_EQ(plan::step_time(llama8b(65536, mesh_of("dp=2,cp=2,tp=4"))).dp,
                   plan::step_time(llama8b(65536, mesh_of("dp=2,fsdp=2,tp=4"))).dp);
}

TEST(PlanContextParallelSearch, PicksCpOnlyForASequenceThatNeedsIt) {
  // 16 rows of 128k tokens of an 8B model on one node of 8 H100s: the search's best has cp > 1.
  // Without cp only layouts with checkpointing fit, and they are slower: pipelines (a stage still
  // holds a whole row's residual stream for each layer it holds) and, since sequence parallelism
  // splits that stream over tp (issue 31, item 7), tp 4 and 8 without pp (fsdp=2 x tp=4: 56 GB,
  // 5% slower than the best). (Before issue 31 none fitted: a stage's f32 buffers and its
  // warm-up's outputs kept until a gradient came back took 2-4 GB more.)
  PlanInput long_base = llama8b(131072, {});
  long_base.global_batch = 16;
  const plan::SearchResult long_seq = plan::search_layouts(long_base, 8);
  ASSERT_FALSE(long_seq.ranked.empty());
  EXPECT_GT(long_seq.ranked.front().input.mesh.cp, 1) << long_seq.ranked.front().input.mesh.str();
  for (const auto& c : long_seq.ranked)
    if (c.input.mesh.cp == 1) {
      EXPECT_GT(c.input.mesh.pp * c.input.mesh.tp, 2) << c.input.mesh.str() << " fits without cp, pp or tp > 2";
      EXPECT_TRUE(c.input.checkpointing) << c.input.mesh.str() << " fits without checkpointing";
      EXPECT_GT(c.time.step, long_seq.ranked.front().time.step) << c.input.mesh.str();
    }
  bool tried_without = false;
  for (const auto& c : long_seq.too_big) tried_without = tried_without || c.input.mesh.cp == 1;
  EXPECT_TRUE(tried_without);
  // Every cp the search tried cuts the sequence into 2 cp chunks.
  for (const auto* v : {&long_seq.ranked, &long_seq.too_big})
    for (const auto& c : *v) EXPECT_EQ(c.input.seq % (2 * c.input.mesh.cp), 0);
  // 4k tokens: the same devices are faster splitting the batch than the rows.
  PlanInput short_base = llama8b(4096, {});
  short_base.global_batch = 16;
  const plan::SearchResult short_seq = plan::search_layouts(short_base, 8);
  ASSERT_FALSE(short_seq.ranked.empty());
  EXPECT_EQ(short_seq.ranked.front().input.mesh.cp, 1) << short_seq.ranked.front().input.mesh.str();
  bool tried_cp = false;
  for (const auto& c : short_seq.ranked) tried_cp = tried_cp || c.input.mesh.cp > 1;
  EXPECT_TRUE(tried_cp);  // cp fits there too, but is slower
  // A sequence 2 cp does not divide is never tried with that cp: 4 tokens a row allow cp = 1 and 2
  // of 4 devices, not 4. (Before issue 31 item 3 this used 6 tokens on 6 devices, cp = 3; now cp
  // shards the parameters, and 3 divides none of the 8B's dimensions: those meshes are invalid.)
  PlanInput odd = llama8b(4, {});
  odd.global_batch = 1;
  const plan::SearchResult odd_seq = plan::search_layouts(odd, 4);
  bool tried_two = false;
  for (const auto* v : {&odd_seq.ranked, &odd_seq.too_big})
    for (const auto& c : *v) {
      EXPECT_TRUE(c.input.mesh.cp == 1 || c.input.mesh.cp == 2) << c.input.mesh.str();
      tried_two = tried_two || c.input.mesh.cp == 2;
    }
  EXPECT_TRUE(tried_two);
  // And a cp that divides the sequence but not the parameters' dimensions is an invalid mesh, as
  // the trainer refuses it: cp = 3 of 6 devices at 6 tokens (4096 columns do not split in 3).
  PlanInput six = llama8b(6, {});
  six.global_batch = 1;
  const plan::SearchResult six_seq = plan::search_layouts(six, 6);
  for (const auto* v : {&six_seq.ranked, &six_seq.too_big})
    for (const auto& c : *v) EXPECT_EQ(c.input.mesh.cp, 1) << c.input.mesh.str();
  EXPECT_GT(six_seq.invalid, 0);
}

// `train --mesh auto` on 2 ranks with one row of 1024 tokens a step: the rows cannot be shared
// out (batch 1), so the choice is among tp = 2, pp = 2 and cp = 2, and the search prices cp's K/V
// exchange (GQA: 4 KV heads of 8) below tp's two all-reduces of the hidden state per layer. The
// trainer accepts the layout and trains it; run.toml records it.
TEST(PlanContextParallelAuto, PicksCpForALongRowAndTrainsIt) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string dir = fresh_temp_dir("plan_cp_auto") + "/run";
  std::string out;
  ASSERT_EQ(run(mpirun(2) + MESHTRAIN_BINARY +
                    " train --mesh auto --set train.batch_size=1 --set train.seq_len=1024"
                    " --set model.max_position_embeddings=1024 --set data.val_fraction=0 --set train.steps=2"
                    " --set train.peak_gflops=100 --set output.dir=" + dir + " 2>&1",
                &out),
            0)
      << out;
  EXPECT_NE(out.find("mesh auto: cp=2 of 2 ranks"), std::string::npos) << out;
  EXPECT_NE(read_file(dir + "/run.toml").find("cp = 2"), std::string::npos);
  EXPECT_EQ(losses(dir).size(), 2u);
}

TEST(PlanContextParallelCli, PlansACpMeshAndRefusesWhatItCannotSplit) {
  const std::string plan = std::string(MESHTRAIN_BINARY) + " plan --model llama3-8b --cluster dgx-h100 ";
  std::string out;
  ASSERT_EQ(run(plan + "--mesh cp=2,tp=8 --seq 131072 --global-batch 1 2>&1", &out), 0) << out;
  EXPECT_NE(out.find("ZeRO-3 over cp, mesh dp=1,fsdp=1,tp=8,pp=1,cp=2 on 16 devices = 2 nodes of dgx-h100"),
            std::string::npos) << out;
  EXPECT_NE(out.find("cp K/V exchange"), std::string::npos) << out;
  ASSERT_EQ(run(plan + "--mesh cp=2,tp=8 --seq 131072 --global-batch 1 --json 2>&1", &out), 0) << out;
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j.at("mesh").at("cp"), 2);
  EXPECT_GT(j.at("time_s").at("cp").get<double>(), 0.0);
  EXPECT_GT(j.at("memory_bytes").at("items").at("cp K/V exchange").get<double>(), 0.0);
  // The search's table has a cp column, and picks cp for the long rows.
  ASSERT_EQ(run(plan + "--search --devices 8 --seq 131072 --global-batch 16 --top 1 --json 2>&1", &out), 0) << out;
  EXPECT_GT(nlohmann::json::parse(out).at("top").at(0).at("mesh").at("cp").get<int64_t>(), 1) << out;
  ASSERT_EQ(run(plan + "--search --devices 8 --seq 131072 --global-batch 16 --top 1 2>&1", &out), 0) << out;
  EXPECT_NE(out.find("rank  dp  fsdp  tp  pp  cp  mb"), std::string::npos) << out;
  // One line: a sequence 2 cp does not divide.
  EXPECT_NE(run(plan + "--mesh cp=4,tp=2 --seq 4100 2>&1", &out), 0);
  EXPECT_NE(out.find("mesh cp=4,tp=2: sequence length 4100 is not divisible by 2 x cp = 8"),
            std::string::npos)
      << out;
}

// The Frontier study's GPT shapes are GPT-2 blocks, priced like every family, so cp splits their
// rows too: GPT-175B with its position table grown to 32768 (a config.json written from the
// preset's own keys) plans at seq 32768 on cp = 4 x tp = 8, K/V exchange and all, and a rank's
// activations are about a quarter of cp = 1's.
TEST(PlanContextParallelCli, PlansTheGpt175bAtALongSequenceOnCp) {
  auto keys = nlohmann::json::parse(family_preset_json("gpt-175b"));
  keys["n_positions"] = 32768;
  const std::string dir = fresh_temp_dir("plan_cp_gpt175b");
  std::ofstream(dir + "/config.json") << keys.dump();
  const std::string plan = std::string(MESHTRAIN_BINARY) + " plan --model " + dir +
                           "/config.json --cluster dgx-h100 --seq 32768 --global-batch 1 --checkpointing --json ";
  std::string out;
  ASSERT_EQ(run(plan + "--mesh cp=4,tp=8,pp=4 2>&1", &out), 0) << out;
  const auto cp4 = nlohmann::json::parse(out);
  EXPECT_EQ(cp4.at("parameters").at("base").get<int64_t>(), 174609555456 + (32768 - 2048) * int64_t(12288));
  EXPECT_GT(cp4.at("time_s").at("cp").get<double>(), 0.0);
  EXPECT_GT(cp4.at("memory_bytes").at("items").at("cp K/V exchange").get<double>(), 0.0);
  ASSERT_EQ(run(plan + "--mesh tp=8,pp=4 --devices 32 2>&1", &out), 0) << out;
  const auto cp1 = nlohmann::json::parse(out);
  const double ratio = cp4.at("memory_bytes").at("items").at("activations").get<double>() /
                       cp1.at("memory_bytes").at("items").at("activations").get<double>();
  EXPECT_NEAR(ratio, 0.25, 0.01) << out;
}

}  // namespace
}  // namespace mt::testing
