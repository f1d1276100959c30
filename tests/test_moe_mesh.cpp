// Mixture-of-experts models on real MPI ranks and through the binary: a Qwen3-MoE-like model (a
// dense layer among sparse ones, q/k norms, k = 2 of 4 experts) and a Mixtral-like one (every
// layer sparse, its block_sparse_moe names) in their HF layout, fine-tuned from that directory
// (full, LoRA on every expert, QLoRA with the experts in NF4) on fsdp=2, dp=2, pp=2, cp=2 and
// the expert-parallel ep=2, ep=4, fsdp=2 x ep=2, pp=2 x ep=2 and ep=2 x cp=2, give the one-rank
// run's losses and final parameters (fp32), the routing losses on fsdp, dp, cp, ep, pp and pp x ep
// too; so do tp=2 (every expert split as the MLP; with sequence parallelism too), ep=2 x tp=2 and
// fsdp=2 x tp=2, and an OLMoE-like one (q/k norms over the whole projections) on tp=2 (with and
// without sequence parallelism, and in bf16 to its tolerance) and ep=2 x tp=2; a run resumes across ep layouts. An ep that does not divide the experts, or a
// dense model on ep, is refused in one line.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "io/peft_config.h"
#include "io/safetensors_index.h"
#include "mesh_runs.h"
#include "model/transformer.h"
#include "moe_model_dir.h"

namespace mt::testing {
namespace {

const char* kRun =
    "--set train.steps=6 --set train.precision=fp32 --set train.peak_gflops=100 "
    "--set train.batch_size=4 --set train.grad_accum=2 --set train.seq_len=32 "
    "--set train.log_every=100 --set optim.warmup_steps=2 ";

// moe_model_dir's model (Qwen3-MoE's with a dense layer); a config file that names it as
// model.path. `aux`: the routing losses on.
std::string moe_model(const std::string& family, const std::string& tag, bool aux = false) {
  const std::string dir = moe_model_dir(family, tag, [&](ModelConfig& c) {
    if (family == "qwen3_moe") c.mlp_only_layers = {1};  // a dense layer among the sparse
    c.output_router_logits = aux;
    if (aux) c.router_aux_loss_coef = 0.1f, c.router_z_loss_coef = 0.01f;  // large enough to steer
  });
  std::ofstream(dir + ".toml") << "[model]\npath = \"" << dir << "\"\n";
  return dir + ".toml";
}

struct MoeMeshCase {
  const char* family;
  const char* mesh;
};

class MoeMeshEquality : public ::testing::TestWithParam<MoeMeshCase> {};

TEST_P(MoeMeshEquality, FullTrainingMatchesOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string tag = std::string("moe_") + GetParam().family + "_" + tag_of(GetParam().mesh);
  expect_same_run(tag, "--config " + moe_model(GetParam().family, tag) + " " + kRun, GetParam().mesh,
                  "/model/model.safetensors");
}

TEST_P(MoeMeshEquality, LoraOnEveryExpertMatchesOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string tag = std::string("moe_lora_") + GetParam().family + "_" + tag_of(GetParam().mesh);
  // Adam's eps raised to 1e-6: at lr 1e-2 an adapter element whose gradient is noise around zero
  // (1e-9) moves by lr whichever sign the noise has, and the layouts sum in other orders; the
  // losses (1e-5) and gradient norms (5e-5) are compared as tightly either way. (Seen on
  // mixtral tp=2: losses within 3e-9, one attention adapter element 1.1e-4 apart with eps 1e-8.)
  const std::string lora =
      "--set lora.enabled=true --set lora.rank=4 --set optim.lr=1e-2 --set optim.eps=1e-6 "
      "--set 'lora.targets=[\"q\",\"k\",\"v\",\"o\",\"gate\",\"up\",\"down\"]' ";
  expect_same_run(tag, "--config " + moe_model(GetParam().family, tag) + " " + kRun + lora, GetParam().mesh,
                  "/adapter/adapter_model.safetensors");
}

INSTANTIATE_TEST_SUITE_P(Meshes, MoeMeshEquality,
                         ::testing::Values(MoeMeshCase{"qwen3_moe", "fsdp=2"}, MoeMeshCase{"qwen3_moe", "dp=2"},
                                           MoeMeshCase{"qwen3_moe", "pp=2"}, MoeMeshCase{"qwen3_moe", "cp=2"},
                                           MoeMeshCase{"mixtral", "fsdp=2"}, MoeMeshCase{"mixtral", "pp=2"},
                                           // Expert parallelism: alone (2 and 4 ranks, 2 and 1 of the
                                           // 4 experts each) and beside fsdp, pp and cp.
                                           MoeMeshCase{"qwen3_moe", "ep=2"}, MoeMeshCase{"qwen3_moe", "ep=4"},
                                           MoeMeshCase{"qwen3_moe", "fsdp=2,ep=2"},
                                           MoeMeshCase{"qwen3_moe", "pp=2,ep=2"},
                                           MoeMeshCase{"qwen3_moe", "ep=2,cp=2"}, MoeMeshCase{"mixtral", "ep=2"},
                                           // Expert tensor parallelism: every expert split as the
                                           // MLP, alone, beside ep and beside fsdp.
                                           MoeMeshCase{"qwen3_moe", "tp=2"}, MoeMeshCase{"mixtral", "tp=2"},
                                           MoeMeshCase{"qwen3_moe", "ep=2,tp=2"},
                                           MoeMeshCase{"qwen3_moe", "fsdp=2,tp=2"},
                                           // OLMoE's q/k norms span every tp rank's heads: their
                                           // row statistics summed over the ranks.
                                           MoeMeshCase{"olmoe", "tp=2"}, MoeMeshCase{"olmoe", "ep=2,tp=2"}),
                         [](const auto& info) { return std::string(info.param.family) + "_" + tag_of(info.param.mesh); });

// The routing losses' statistics summed over the ranks of the batch's tokens: the gradients, and
// so the weights, are one rank's (the logged loss is the tokens').
class MoeRoutingLossMesh : public ::testing::TestWithParam<const char*> {};

TEST_P(MoeRoutingLossMesh, RoutingLossesMatchOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string tag = std::string("moe_aux_") + tag_of(GetParam());
  expect_same_run(tag, "--config " + moe_model("qwen3_moe", tag, /*aux=*/true) + " " + kRun, GetParam(),
                  "/model/model.safetensors");
  // metrics.jsonl carries them beside the tokens' loss, the same on every layout.
  const std::string base = temp_dir_of("mesh_" + tag);
  const auto one = metric(base + "/one", "routing_loss"), many = metric(base + "/mesh", "routing_loss");
  ASSERT_EQ(one.size(), 6u);
  ASSERT_EQ(many.size(), one.size());
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_GT(one[i], 0.1 * 2.0 * (1 - 1e-6));  // aux_coef x E sum f P >= aux_coef x k
    EXPECT_NEAR(many[i], one[i], 1e-5 * one[i]) << GetParam() << " step " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Meshes, MoeRoutingLossMesh,
                         ::testing::Values("fsdp=2", "dp=2", "cp=2", "ep=2", "pp=2", "pp=2,ep=2"),
                         [](const auto& info) { return tag_of(info.param); });

// The statistics crossing the cuts of the other schedules: interleaved 1F1B (4 chunks over 2
// stages: stage 0's chunk 2 receives from stage 1 and its totals come back from stage 1's chunk 3)
// and GPipe (every forward first).
TEST(MoeMesh, RoutingLossesOnInterleavedAndGpipeSchedulesMatchOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  for (const std::string schedule : {"--set train.pp_virtual=2 ", "--set train.pp_schedule=gpipe "}) {
    const std::string tag = schedule.find("gpipe") != std::string::npos ? "moe_aux_gpipe" : "moe_aux_virtual";
    const std::string args = "--config " + moe_model("qwen3_moe", tag, /*aux=*/true) + " " + kRun;
    expect_same_training(tag, train_command(""), args, train_command("pp=2"), args + schedule,
                         "/model/model.safetensors");
  }
}

// lora.train_router: each router's trainable copy (laid out as the router, started from its
// blocks) trains with the adapters, the routing losses on: the adapter, copies included, is one
// rank's on every axis the router crosses.
class MoeRouterTrainingMesh : public ::testing::TestWithParam<const char*> {};

TEST_P(MoeRouterTrainingMesh, TrainedRoutersMatchOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string tag = std::string("moe_router_") + tag_of(GetParam());
  const std::string lora =
      "--set lora.enabled=true --set lora.rank=4 --set optim.lr=1e-2 --set optim.eps=1e-6 "
      "--set lora.train_router=true --set 'lora.targets=[\"q\",\"v\",\"gate\",\"up\",\"down\"]' ";
  expect_same_run(tag, "--config " + moe_model("qwen3_moe", tag, /*aux=*/true) + " " + kRun + lora, GetParam(),
                  "/adapter/adapter_model.safetensors");
  const SafetensorsCheckpoint adapter(temp_dir_of("mesh_" + tag) + "/one/adapter/adapter_model.safetensors");
  EXPECT_TRUE(adapter.contains("base_model.model.model.layers.0.mlp.gate.weight"));  // the copy, trained
}

INSTANTIATE_TEST_SUITE_P(Meshes, MoeRouterTrainingMesh, ::testing::Values("fsdp=2", "ep=2", "pp=2", "tp=2"),
                         [](const auto& info) { return tag_of(info.param); });

// train.moe_capacity_factor: the capacity counts a rank's tokens (as Switch and Megatron count a
// device's), so the layouts that route the same tokens on every rank (pp, tp) give one rank's
// run, drops included, and every step logs them (moe_dropped); a dense model refuses the key.
TEST(MoeMesh, ACapacityFactorDropsTheSameChoicesOnPpAndTp) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  for (const std::string mesh : {"pp=2", "tp=2"}) {
    const std::string tag = "moe_capacity_" + tag_of(mesh);
    const std::string args = "--config " + moe_model("qwen3_moe", tag) + " " + kRun + "--set train.moe_capacity_factor=0.5 ";
    expect_same_run(tag, args, mesh, "/model/model.safetensors");
    const std::string base = temp_dir_of("mesh_" + tag);
    const auto one = metric(base + "/one", "moe_dropped"), many = metric(base + "/mesh", "moe_dropped");
    ASSERT_EQ(one.size(), 6u) << mesh;
    EXPECT_EQ(many, one) << mesh;
    for (double d : one) EXPECT_GT(d, 0.0) << mesh;
  }
  std::string out;
  EXPECT_NE(run(train_command("") + kRun + "--set train.moe_capacity_factor=1.25 --set output.dir=" +
                    fresh_temp_dir("moe_capacity_dense") + "/run 2>&1",
                &out),
            0);
  EXPECT_NE(out.find("train.moe_capacity_factor caps a mixture of experts"), std::string::npos) << out;
}

// QLoRA: the experts in NF4 (the router kept), each fsdp rank quantising its own rows.
TEST(MoeMesh, QloraWithTheExpertsInNf4MatchesOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string qlora =
      "--set lora.enabled=true --set lora.rank=4 --set optim.lr=1e-2 --set lora.base_dtype=nf4 "
      "--set 'lora.targets=[\"q\",\"v\",\"gate\",\"up\",\"down\"]' ";
  const std::string tag = "moe_qlora_fsdp";
  // 1e-4: 5.4e-5 measured on an AVX2-only CPU (2026-12-07), whose bf16 GEMMs are widened to f32
  // (kernels/cpu/gemm.h) and sum in another order than the AVX-512 machines' (under 5e-5 there).
  expect_same_run(tag, "--config " + moe_model("qwen3_moe", tag) + " " + kRun + qlora, "fsdp=2",
                  "/adapter/adapter_model.safetensors", 1e-4);
}

// A Qwen3-MoE-like model whose routers are zero (every expert the same logit, so the tie goes to
// experts 0 and 1 for every token), and a run config <dir>.toml naming it.
std::string zero_router_model(const std::string& tag) {
  const std::string dir = moe_model_dir("qwen3_moe", tag, {}, [](Transformer& m) {
    const ModelConfig& c = m.config();
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
      const std::string router = moe_router_name(l, c);
      m.base().set_values(router, std::vector<float>(size_t(m.base().get(router).numel), 0.0f).data());
    }
  });
  std::ofstream(dir + ".toml") << "[model]\npath = \"" << dir << "\"\n";
  return dir;
}

// Every token choosing the same experts: zero routers give every expert the same logit, so the
// tie goes to experts 0 and 1 (the lower indices) for every token, and LoRA keeps the routers
// frozen. On ep=2 one rank computes every row of every rank, on ep=4 two ranks compute nothing.
class MoeOneSidedRouting : public ::testing::TestWithParam<const char*> {};

TEST_P(MoeOneSidedRouting, EveryTokenOnTheSameExpertsMatchesOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string tag = std::string("moe_one_sided_") + tag_of(GetParam());
  const std::string dir = zero_router_model(tag);
  const std::string lora =
      "--set lora.enabled=true --set lora.rank=4 --set optim.lr=1e-2 "
      "--set 'lora.targets=[\"q\",\"v\",\"gate\",\"up\",\"down\"]' ";
  expect_same_run(tag, "--config " + dir + ".toml " + kRun + lora, GetParam(), "/adapter/adapter_model.safetensors");
}

INSTANTIATE_TEST_SUITE_P(Meshes, MoeOneSidedRouting, ::testing::Values("ep=2", "ep=4", "fsdp=2,ep=2"),
                         [](const auto& info) { return tag_of(info.param); });

// A capacity factor's worst case under ep: every token of both ranks chooses experts 0 and 1 (zero
// routers), both on rank 0, and each rank keeps ceil(1.5 N k / E) choices an expert of its N k, so
// rank 0 receives exactly E times that: the most moe_expert_rows planned room for (model/moe.h).
// The run trains, counts its drops, and rank 0's arena holds what it received.
TEST(MoeMesh, ACapacityFactorsWorstCaseFitsAnEpRanksRoom) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string tag = "moe_capacity_one_sided";
  const std::string dir = zero_router_model(tag);
  const std::string out_dir = fresh_temp_dir("mesh_" + tag) + "/run";
  std::string out;
  ASSERT_EQ(run(train_command("ep=2") + "--config " + dir + ".toml " + kRun +
                    "--set train.moe_capacity_factor=1.5 --set output.dir=" + out_dir + " 2>&1",
                &out),
            0)
      << out;
  const auto dropped = metric(out_dir, "moe_dropped");
  ASSERT_FALSE(dropped.empty()) << out;
  for (double d : dropped) EXPECT_GT(d, 0.0);
}

// Sequence parallelism beside tp: the MoE layer's input gathered whole and its output summed and
// scattered back to each rank's rows, as the MLP's; with LoRA on the experts' row-parallel down.
TEST(MoeMesh, SequenceParallelWithLoraOnTheExpertsMatchesOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string tag = "moe_tp_sp_lora";
  const std::string lora =
      "--set lora.enabled=true --set lora.rank=4 --set optim.lr=1e-2 --set train.sequence_parallel=true "
      "--set 'lora.targets=[\"q\",\"o\",\"gate\",\"up\",\"down\"]' ";
  expect_same_run(tag, "--config " + moe_model("qwen3_moe", tag) + " " + kRun + lora, "tp=2",
                  "/adapter/adapter_model.safetensors");
}

// OLMoE's whole-projection q/k norms on tp without sequence parallelism (the tp=2 cases above run
// with it, the default): q and k are whole rows inside the tensor-parallel region either way, so
// the norms' row sums add over the tp ranks alike.
TEST(MoeMesh, OlmoeWithoutSequenceParallelismMatchesOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string tag = "moe_olmoe_tp_no_sp";
  expect_same_run(tag, "--config " + moe_model("olmoe", tag) + " " + kRun + "--set train.sequence_parallel=false ",
                  "tp=2", "/model/model.safetensors");
}

// OLMoE on tp=2 in bf16 mixed precision (the cases above are fp32): each rank widens its bf16
// columns of q and k to f32 for the norms' row sums, which tp adds in f32, but the tp partial sums
// of the products are rounded to bf16 once more than on one rank, so the runs agree to bf16's
// precision, not bit for bit: losses within 0.5%, as the dense models' bf16 tp runs
// (Sharded.Bf16MixedPrecisionTracksOneRank). Measured 4.2e-5 relative at most (2026-12-07).
TEST(MoeMesh, OlmoeInBf16OnTensorParallelTracksOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string tag = "moe_olmoe_tp_bf16";
  std::string args = "--config " + moe_model("olmoe", tag) + " " + kRun;
  args.replace(args.find("precision=fp32"), 14, "precision=bf16");
  const std::string base = fresh_temp_dir("mesh_" + tag);
  std::string out;
  ASSERT_EQ(run(train_command("") + args + "--set output.dir=" + base + "/one 2>&1", &out), 0) << out;
  ASSERT_EQ(run(train_command("tp=2") + args + "--set output.dir=" + base + "/mesh 2>&1", &out), 0) << out;
  const auto one = losses(base + "/one"), many = losses(base + "/mesh");
  ASSERT_EQ(one.size(), 6u);
  ASSERT_EQ(many.size(), one.size());
  for (size_t i = 0; i < one.size(); ++i) EXPECT_NEAR(many[i], one[i], 5e-3 * one[i]) << "step " << i;
  EXPECT_LT(many.back(), many.front()) << "the bf16 tp run did not learn";
}

// The experts in NF4 split over ep, each rank quantising its own experts. The default weight
// tolerance (1e-4, mesh_runs.h): ep computes an expert's rows in blocks by source rank (its own
// first, overlapping the exchanges: docs/mesh.md), so an adapter's weight gradient sums them in
// other pieces than one rank's single product, and at lr 1e-2 an element whose gradient is noise
// around zero moves by a visible fraction of lr (7.1e-5 seen on 2026-12-07, AVX2; 5e-5 held
// while ep computed each expert's rows in one product, as one rank does).
TEST(MoeMesh, QloraWithTheExpertsSplitOverEpMatchesOneRank) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string qlora =
      "--set lora.enabled=true --set lora.rank=4 --set optim.lr=1e-2 --set lora.base_dtype=nf4 "
      "--set 'lora.targets=[\"q\",\"v\",\"gate\",\"up\",\"down\"]' ";
  const std::string tag = "moe_qlora_ep";
  expect_same_run(tag, "--config " + moe_model("qwen3_moe", tag) + " " + kRun + qlora, "ep=2",
                  "/adapter/adapter_model.safetensors");
}

// A checkpoint holds every expert whole whatever the layout that wrote it: a run saved with the
// experts split over ep resumes under fsdp, and one saved under fsdp resumes under ep x fsdp.
TEST(MoeMesh, ResumesAcrossEpLayouts) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string tag = "moe_resume_ep";
  const std::string model = "--config " + moe_model("qwen3_moe", tag) + " " + kRun;
  expect_resume_across(tag + "_a", model, "ep=2", "fsdp=2");
  expect_resume_across(tag + "_b", model, "fsdp=2", "fsdp=2,ep=2");
}

// The adapter PEFT reads for Mixtral names its experts' modules w1 / w3 / w2.
TEST(MoeMesh, MixtralsAdapterNamesItsExpertsModules) {
  const std::string tag = "moe_mixtral_peft";
  const std::string dir = fresh_temp_dir(tag) + "/run";
  std::string out;
  ASSERT_EQ(run(train_command("") + "--config " + moe_model("mixtral", tag) + " " + kRun +
                    "--set lora.enabled=true --set 'lora.targets=[\"q\",\"gate\",\"up\",\"down\"]' --set output.dir=" +
                    dir + " 2>&1",
                &out),
            0)
      << out;
  const LoraConfig back = read_peft_config(dir + "/adapter");
  EXPECT_EQ(back.targets, (std::vector<std::string>{"q", "gate", "up", "down"}));
  std::ifstream f(dir + "/adapter/adapter_config.json");
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\"w1\""), std::string::npos) << text;
  EXPECT_EQ(text.find("gate_proj"), std::string::npos) << text;
}

// `shard --preset` lays out a preset's experts (their family parts come from the preset, not from
// the [model] keys a run config has); --all names each expert (the listing groups them otherwise).
TEST(MoeMesh, ShardLaysOutAPresetsExperts) {
  std::string out;
  ASSERT_EQ(run(std::string(MESHTRAIN_BINARY) + " shard --preset mixtral-8x7b --mesh fsdp=8 --all 2>&1", &out), 0) << out;
  EXPECT_NE(out.find("block_sparse_moe.experts.7.w2.weight"), std::string::npos) << out;
  EXPECT_NE(out.find("block_sparse_moe.gate.weight"), std::string::npos) << out;
}

TEST(MoeMesh, AnEpThatCannotSplitTheExpertsIsOneLine) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  std::string out;
  const std::string tag = "moe_refused";
  const std::string model = moe_model("qwen3_moe", tag);
  // ep must divide the experts (4 here), and a dense model has none to split.
  EXPECT_NE(run(train_command("ep=3") + "--config " + model + " " + kRun + "--set train.batch_size=6 --set output.dir=" +
                    fresh_temp_dir(tag) + "/ep3 2>&1",
                &out),
            0);
  EXPECT_NE(out.find("mesh ep=3 does not divide the model's 4 experts"), std::string::npos) << out;
  EXPECT_NE(run(train_command("ep=2") + kRun + "--set output.dir=" + fresh_temp_dir(tag) + "/dense 2>&1", &out), 0);
  EXPECT_NE(out.find("the model has no mixture of experts to split"), std::string::npos) << out;
}

}  // namespace
}  // namespace mt::testing
