// The planner under expert parallelism (issue 32 item 8): a rank's expert bytes are what the
// trainer's own layout gives it (parallel::shard_params / bytes_per_rank), its MoE activations the
// engine's ep-rank sizes, the all-to-all volume and time per MoE layer follow the ep group's link
// and the rows it moves, the imbalance factor weighs the expert compute under ep only, and the
// search tries ep for a mixture of experts (ep = 1 for a dense model) and picks it when memory
// leaves nothing else. In-process and shape-only: nothing is trained here.
#include <gtest/gtest.h>

#include <string>

#include "error_of.h"
#include "model/param_shapes.h"
#include "parallel/expert_parallel.h"
#include "parallel/shard_plan.h"
#include "plan/auto_mesh.h"
#include "plan/collectives.h"
#include "plan/expert_traffic.h"
#include "plan/report.h"
#include "plan/search.h"

namespace mt::testing {
namespace {

using plan::PlanInput;

parallel::MeshShape mesh_of(const std::string& text) { return parallel::MeshShape::parse(text); }

// `preset` in full bf16 training on one node of 8 x H100, one sequence of 1024 tokens per
// data-parallel rank and step.
PlanInput moe_run(const std::string& preset, const std::string& mesh) {
  PlanInput in;
  in.model = plan::model_preset(preset);
  in.cluster = plan::cluster_preset("dgx-h100");
  in.mesh = mesh_of(mesh);
  in.seq = 1024, in.micro_batch = 1, in.global_batch = in.mesh.batch_ranks();
  return in;
}

plan::Candidate priced(const PlanInput& in) { return {in, plan::peak_memory(in), plan::step_time(in)}; }

// Rank r's bf16 bytes of the experts' base matrices, from the trainer's layout of the whole model.
std::vector<int64_t> expert_bytes_by_rank(const ModelConfig& c, const parallel::MeshShape& mesh) {
  std::vector<ParamShape> experts;
  for (const ParamShape& p : llama_param_shapes(c, LoraConfig{}))
    if (p.expert >= 0) experts.push_back(p);
  const auto sharded = parallel::shard_params(experts, false, parallel::default_llama_rules(), mesh);
  std::vector<int64_t> out;
  for (const auto& b : parallel::bytes_per_rank(sharded, mesh)) out.push_back(b.weights_bf16());
  return out;
}

TEST(MoePlannerEp, ExpertBytesPerRankAreTheTrainersLayout) {
  for (const std::string mesh : {"ep=8", "fsdp=2,ep=4", "dp=2,ep=4", "fsdp=8"}) {
    SCOPED_TRACE(mesh);
    const PlanInput in = moe_run("mixtral-8x7b", mesh);
    const auto j = plan::plan_json(priced(in));
    const std::vector<int64_t> ranks = expert_bytes_by_rank(in.model.config, in.mesh);
    for (int64_t b : ranks) EXPECT_DOUBLE_EQ(j["experts"]["bytes_per_rank"].get<double>(), double(b));
    // A rank holds its E / ep experts, split over fsdp: the whole experts once per dp replica.
    EXPECT_DOUBLE_EQ(j["experts"]["bytes_per_rank"].get<double>() * double(in.mesh.ep * in.mesh.fsdp),
                     j["experts"]["bytes_total"].get<double>());
    EXPECT_EQ(j["mesh"]["ep"].get<int64_t>(), in.mesh.ep);
  }
}

TEST(MoePlannerEp, ParameterStateOfARankHoldsOnlyItsExperts) {
  // ep=8 against one rank: everything but the experts whole, the experts an eighth.
  const PlanInput one = moe_run("mixtral-8x7b", "dp=1"), ep = moe_run("mixtral-8x7b", "ep=8");
  const auto s1 = plan::stage_params(one)[0].params, s8 = plan::stage_params(ep)[0].params;
  const int64_t experts = s1.local - s8.local;  // 7/8 of them left ep rank 0
  EXPECT_EQ(experts % 7, 0);
  EXPECT_EQ(s8.local_expert_trainable, experts / 7);
  EXPECT_EQ(s1.local_expert_trainable, 0);  // counted under ep only
}

TEST(MoePlannerEp, ActivationsAreTheEngineSizesOfAnEpRank) {
  const PlanInput one = moe_run("qwen3-30b-a3b", "ep=1"), ep = moe_run("qwen3-30b-a3b", "ep=4");
  // The same run on one rank whose model is ep rank 0's (its MoE rows sized for 4 ranks' tokens).
  PlanInput local = one;
  local.model.config = parallel::expert_parallel_config(one.model.config, 4, 0);
  const auto a_ep = plan::activation_bytes(ep, 48, true, true);
  const auto a_local = plan::activation_bytes(local, 48, true, true);
  EXPECT_DOUBLE_EQ(a_ep.per_micro_batch, a_local.per_micro_batch);
  EXPECT_DOUBLE_EQ(a_ep.shared, a_local.shared);
  EXPECT_GT(a_ep.per_micro_batch, plan::activation_bytes(one, 48, true, true).per_micro_batch);
}

TEST(MoePlannerEp, AllToAllVolumeIsTheRoutedRowsThatLeaveTheRank) {
  const PlanInput in = moe_run("mixtral-8x7b", "ep=8");
  const auto& c = in.model.config;
  const double rows = 1024.0 * double(c.num_experts_per_tok) * double(c.hidden_size) * 2.0;  // bf16
  const plan::ExpertExchange x = plan::expert_exchange(in);
  EXPECT_DOUBLE_EQ(x.bytes, rows * 7.0 / 8.0);
  EXPECT_TRUE(x.intra_node);
  EXPECT_DOUBLE_EQ(x.seconds, plan::all_to_all(rows, 8, plan::axis_link(in.mesh, parallel::Axis::ep, in.cluster)));
  EXPECT_EQ(plan::expert_exchange(moe_run("mixtral-8x7b", "dp=8")).bytes, 0.0);
}

TEST(MoePlannerEp, AllToAllTimeFollowsTheLinkAndTheVolume) {
  const PlanInput intra = moe_run("mixtral-8x7b", "ep=8");
  // 2 x 8 ranks: ep=8 with cp=2 inside it spans 16 ranks, two nodes.
  PlanInput across = moe_run("mixtral-8x7b", "ep=8,cp=2");
  const plan::ExpertExchange a = plan::expert_exchange(intra), b = plan::expert_exchange(across);
  EXPECT_FALSE(b.intra_node);
  EXPECT_DOUBLE_EQ(b.bytes, a.bytes / 2.0);  // a cp rank routes half a row's tokens
  EXPECT_GT(b.seconds, a.seconds);           // half the bytes, on the slower link
  // Twice the tokens: the bandwidth term doubles (the latency term stays).
  PlanInput longer = intra;
  longer.seq *= 2;
  const plan::Link link = plan::axis_link(intra.mesh, parallel::Axis::ep, intra.cluster);
  const double latency = 7.0 * link.latency;
  EXPECT_NEAR(plan::expert_exchange(longer).seconds - latency, 2.0 * (a.seconds - latency), 1e-12);
  // More ranks in the group: more of the rows leave.
  EXPECT_GT(plan::expert_exchange(moe_run("mixtral-8x7b", "ep=8")).bytes,
            plan::expert_exchange(moe_run("mixtral-8x7b", "dp=2,ep=4")).bytes);
}

TEST(MoePlannerEp, StepTimeCountsTwoExchangesForwardAndThreeBackward) {
  PlanInput in = moe_run("mixtral-8x7b", "ep=8");
  in.global_batch = 16;  // 2 micro-batches
  const plan::ExpertExchange x = plan::expert_exchange(in);
  const double layers = double(in.model.layers());
  const plan::TimeBreakdown t = plan::step_time(in);
  EXPECT_NEAR(t.ep, 2.0 * layers * (2.0 * x.seconds + x.count_seconds + 3.0 * x.seconds), 1e-12);
  // Activation checkpointing runs each forward twice: two more exchanges (and the counts) a layer.
  in.checkpointing = true;
  EXPECT_NEAR(plan::step_time(in).ep, 2.0 * layers * (4.0 * x.seconds + 2.0 * x.count_seconds + 3.0 * x.seconds),
              1e-12);
  EXPECT_EQ(plan::step_time(moe_run("mixtral-8x7b", "fsdp=8")).ep, 0.0);
}

TEST(MoePlannerEp, ImbalanceWeighsTheExpertComputeUnderEpOnly) {
  PlanInput ep = moe_run("mixtral-8x7b", "ep=8"), fsdp = moe_run("mixtral-8x7b", "fsdp=8");
  const double ep1 = plan::step_time(ep).compute, fsdp1 = plan::step_time(fsdp).compute;
  ep.moe_imbalance = fsdp.moe_imbalance = 1.5;
  EXPECT_GT(plan::step_time(ep).compute, ep1 * 1.1);
  EXPECT_DOUBLE_EQ(plan::step_time(fsdp).compute, fsdp1);
  ep.moe_imbalance = 0.5;
  EXPECT_NE(error_of([&] { plan::validate(ep); }).find("imbalance"), std::string::npos);
}

TEST(MoePlannerEp, RefusesWhatTheTrainerRefuses) {
  EXPECT_NE(error_of([] { plan::validate(moe_run("llama3-8b", "ep=2")); }).find("no mixture of experts"),
            std::string::npos);
  EXPECT_NE(error_of([] { plan::validate(moe_run("mixtral-8x7b", "ep=16")); }).find("does not divide"),
            std::string::npos);
}

TEST(MoePlannerEp, SearchTriesEpForAMixtureOfExpertsOnly) {
  PlanInput dense = moe_run("llama3-8b", "dp=1");
  dense.global_batch = 8;
  for (const auto& c : plan::search_layouts(dense, 8).ranked) EXPECT_EQ(c.input.mesh.ep, 1);
  PlanInput moe = moe_run("qwen3-30b-a3b", "dp=1");
  moe.global_batch = 8;
  bool tried_ep = false, tried_tp = false;
  const plan::SearchResult r = plan::search_layouts(moe, 8);
  for (const auto* v : {&r.ranked, &r.too_big})
    for (const auto& c : *v) {
      tried_ep = tried_ep || c.input.mesh.ep > 1;
      tried_tp = tried_tp || c.input.mesh.tp > 1;  // expert tensor parallelism, priced and measured
    }
  EXPECT_TRUE(tried_ep);
  EXPECT_TRUE(tried_tp);
}

// Mixtral 8x7B in full training on 16 H100s with its routing losses on and 74 GB a device: sharding
// whole experts over fsdp gathers layer units of all 8 experts (their buffers alone about 21 GB a
// rank), so every ep = 1 layout without pipeline stages or tp is over; with ep a unit holds the
// rank's own experts only, and such layouts fit (and rank first). Pipeline layouts (fewer layers a
// rank; tried now that the routing losses cross the stages) and tp layouts (each expert split) fit
// without ep too.
TEST(MoePlannerEp, SearchPicksEpWhenMemoryLeavesNothingElse) {
  PlanInput in = moe_run("mixtral-8x7b", "dp=1");
  in.model.config.output_router_logits = true;
  in.seq = 4096, in.global_batch = 16;
  in.cluster.memory_bytes = 74e9;
  const plan::SearchResult r = plan::search_layouts(in, 16);
  ASSERT_FALSE(r.ranked.empty());
  EXPECT_GT(r.ranked.front().input.mesh.ep, 1) << r.ranked.front().input.mesh.str();
  bool pp_tried = false, ep_fits = false;
  for (const auto& c : r.ranked) {
    if (c.input.mesh.pp == 1 && c.input.mesh.tp == 1) {
      EXPECT_GT(c.input.mesh.ep, 1) << c.input.mesh.str();
    }
    ep_fits = ep_fits || c.input.mesh.ep > 1;
  }
  EXPECT_TRUE(ep_fits);
  bool ep1_tried = false;
  for (const auto* v : {&r.ranked, &r.too_big})
    for (const auto& c : *v) pp_tried = pp_tried || c.input.mesh.pp > 1;
  for (const auto& c : r.too_big)
    ep1_tried = ep1_tried || (c.input.mesh.ep == 1 && c.input.mesh.pp == 1 && c.input.mesh.tp == 1);
  EXPECT_TRUE(ep1_tried);
  EXPECT_TRUE(pp_tried);
  // With room to spare the same search also fits layouts without ep (fsdp=16 needs 79 GB).
  in.cluster.memory_bytes = 80e9;
  bool ep1_fits = false;
  for (const auto& c : plan::search_layouts(in, 16).ranked) ep1_fits = ep1_fits || c.input.mesh.ep == 1;
  EXPECT_TRUE(ep1_fits);
}

// `train --mesh auto` makes the same search with the trainer's checks: the same run (with
// checkpointing) chooses a layout that splits each rank's experts, by ep or by tp (each expert split
// over the node: fsdp=4,tp=4 fits, measured 2026-12-06), never fsdp alone.
TEST(MoePlannerEp, MeshAutoChoosesALayoutThatSplitsTheExperts) {
  RunConfig cfg;
  cfg.model = plan::model_preset("mixtral-8x7b").config;
  cfg.model.output_router_logits = true;
  cfg.train.seq_len = 4096, cfg.train.batch_size = 16, cfg.train.grad_accum = 1;
  cfg.train.activation_checkpointing = true;
  plan::Cluster cluster = plan::cluster_preset("dgx-h100");
  cluster.memory_bytes = 74e9;
  const plan::MeshChoice choice = plan::choose_mesh(cfg, cfg.model, cluster, 16);
  const parallel::MeshShape& m = choice.chosen.input.mesh;
  EXPECT_TRUE(m.ep > 1 || m.tp > 1) << plan::describe_choice(choice);
  EXPECT_NE(plan::describe_choice(choice).find("ep="), std::string::npos);  // ep tried, named
}

}  // namespace
}  // namespace mt::testing
