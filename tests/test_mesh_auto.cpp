// `train --mesh auto`: the planner's search picks the mesh of the ranks launched, with the run's
// global batch, micro-batches per step and checkpointing kept; layouts the trainer would refuse are
// left out by the trainer's own checks; the choice is the one `meshtrain plan --search` ranks first
// for the same run and cluster, is printed with its runner-up, recorded in run.toml, and trains.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>

#include "core/error.h"
#include "mesh_runs.h"
#include "plan/auto_mesh.h"
#include "plan/run_memory.h"
#include "train/run_config.h"
#include "train/run_layout.h"
#include "temp_dirs.h"

namespace mt::testing {
namespace {

namespace fs = std::filesystem;

// The built-in model (128 wide, 4 blocks, 8 heads, 4 KV heads, MLP 344, vocabulary 256), short and quick.
const std::string kRun =
    "--steps 6 --set train.seq_len=32 --set train.batch_size=8 --set train.peak_gflops=100 "
    "--set optim.warmup_steps=1 --set train.log_every=1 ";

// A made-up cluster whose memory per device is `memory_gb`: the built-in model at seq 32 and batch 8
// needs, per the planner, 13.6 MB a rank under fsdp=2, 12.2 MB under tp=2 and 11.9 MB under pp=2
// (dp=2 adds a 100 MB gradient bucket), so 1 GB holds every layout and 13 MB only tp=2 and pp=2.
std::string cluster_file(const std::string& name, double memory_gb) {
  static const fs::path dir = fresh_temp_dir("auto_clusters");
  const fs::path path = dir / (name + ".toml");
  std::ofstream(path) << "name = \"" << name << "\"\ndevices_per_node = 8\npeak_tflops = 1.0\nmemory_gb = "
                      << memory_gb
                      << "\nmemory_bandwidth_gbs = 50\nruntime_overhead_gb = 0.001\n"
                         "[intra]\nbandwidth_gbs = 10\nlatency_us = 5\n[inter]\nbandwidth_gbs = 1\nlatency_us = 20\n";
  return path.string();
}

struct AutoRun {
  int rc = -1;
  std::string output;
  parallel::MeshShape chosen;  // as printed
  int64_t printed_world = 0;
};

AutoRun train_auto(int64_t ranks, const std::string& dir, const std::string& args) {
  const std::string launch = ranks == 1 ? std::string("OMP_NUM_THREADS=1 ") : mpirun(ranks);
  AutoRun r;
  r.rc = run(launch + MESHTRAIN_BINARY + " train --mesh auto " + args + " --out " + dir, &r.output);
  std::smatch m;
  if (std::regex_search(r.output, m, std::regex(R"(mesh auto: (\S+) of (\d+) ranks? on )"))) {
    r.chosen = parallel::MeshShape::parse(m[1].str());
    r.printed_world = std::stoll(m[2].str());
  }
  return r;
}

// The layout `meshtrain plan --search` ranks first for the run's model (its saved copy) on `cluster`.
parallel::MeshShape plan_first(int64_t devices, const std::string& model_dir, const std::string& cluster,
                               const std::string& extra = "") {
  const CommandResult r = run_meshtrain("plan --search --devices " + std::to_string(devices) + " --model " +
                                        model_dir + " --cluster " + cluster +
                                        " --seq 32 --global-batch 8 --grad-accum 1 --keep-checkpointing --json --top 1 " +
                                        extra);
  EXPECT_EQ(r.code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output, nullptr, false);
  if (j.is_discarded() || j["top"].empty()) {
    ADD_FAILURE() << "no layout from plan: " << r.output;
    return {};
  }
  const auto& m = j["top"][0]["mesh"];
  return {m["dp"].get<int64_t>(), m["fsdp"].get<int64_t>(), m["tp"].get<int64_t>(), m["pp"].get<int64_t>()};
}

bool same(const parallel::MeshShape& a, const parallel::MeshShape& b) { return a.str() == b.str(); }

void expect_recorded(const std::string& dir, const parallel::MeshShape& mesh) {
  const RunConfig saved = load_run_config(dir + "/run.toml", {});
  EXPECT_TRUE(saved.mesh_auto) << dir;
  EXPECT_EQ(saved.mesh.str(), mesh.str()) << dir;
}

void expect_trained(const std::string& dir) {
  const auto l = losses(dir);
  ASSERT_EQ(l.size(), 6u) << dir;
  EXPECT_LT(l.back(), l.front()) << dir;
}

// ---- the search and the trainer's checks, no ranks ------------------------------------------

RunConfig builtin_run() {
  RunConfig cfg = parse_run_config(default_run_config_toml(), {"train.seq_len=32", "train.batch_size=8"});
  return cfg;
}

TEST(MeshAuto, SearchKeepsTheRunsMicroBatchesAndCheckpointing) {
  const RunConfig cfg = builtin_run();
  plan::PlanInput base = plan::run_plan_input(cfg, cfg.model, 1e9);
  base.checkpointing = true;
  base.global_batch = 16;
  plan::SearchSpace space;
  space.grad_accum = 2;
  space.vary_checkpointing = false;
  const plan::SearchResult r = plan::search_layouts(base, 4, space);
  ASSERT_FALSE(r.ranked.empty());
  std::set<std::string> meshes;
  for (const auto& c : r.ranked) {
    EXPECT_EQ(c.input.micro_batches(), 2) << c.input.mesh.str();
    EXPECT_EQ(c.input.micro_batch * c.input.data_parallel() * 2, 16) << c.input.mesh.str();
    EXPECT_TRUE(c.input.checkpointing);
    EXPECT_TRUE(meshes.insert(c.input.mesh.str()).second) << "one candidate per mesh: " << c.input.mesh.str();
  }
  // Micro-batches per step that do not divide a rank's sequences leave no layout: 16 in 3.
  space.grad_accum = 3;
  EXPECT_TRUE(plan::search_layouts(base, 1, space).ranked.empty());
}

TEST(MeshAuto, LayoutChecksRefuseWhatTheTrainerRefuses) {
  RunConfig cfg = builtin_run();
  const ModelConfig& shape = cfg.model;
  EXPECT_NO_THROW(check_run_layout(cfg, shape, {2, 2, 2, 1}));
  EXPECT_NO_THROW(check_run_layout(cfg, shape, {1, 1, 1, 4}));
  auto refusal = [&](const parallel::MeshShape& m) {
    try {
      check_run_layout(cfg, shape, m);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(refusal({1, 1, 1, 8}), "");  // 8 pipeline stages, 4 blocks
  EXPECT_NE(refusal({1, 1, 8, 1}).find("tensor parallelism"), std::string::npos) << refusal({1, 1, 8, 1});
  cfg.train.batch_size = 6;
  EXPECT_NE(refusal({4, 1, 1, 1}).find("train.batch_size (6) must be divisible by dp x fsdp x ep (4)"), std::string::npos);
  cfg.train.batch_size = 8;
  // QLoRA: tp=2 would cut the down projection's 344 columns into 172, not whole NF4 blocks of 64.
  cfg.lora.enabled = true;
  cfg.lora.base_dtype = "nf4";
  EXPECT_NE(refusal({1, 1, 2, 1}).find("lora.base_dtype = \"nf4\": tp splits the 344 columns"), std::string::npos)
      << refusal({1, 1, 2, 1});
  EXPECT_EQ(refusal({1, 2, 1, 1}), "");
}

TEST(MeshAuto, ChoiceLeavesOutLayoutsTheTrainerRefuses) {
  RunConfig cfg = builtin_run();
  cfg.lora.enabled = true;
  cfg.lora.base_dtype = "nf4";
  const plan::MeshChoice c = plan::choose_mesh(cfg, cfg.model, plan::resolve_cluster(cluster_file("roomy", 1.0)), 2);
  EXPECT_EQ(c.chosen.input.mesh.tp, 1);
  EXPECT_EQ(c.refused, 1);
  EXPECT_NE(c.first_refusal.find("tp=2: lora.base_dtype = \"nf4\""), std::string::npos) << c.first_refusal;
  EXPECT_NE(plan::describe_choice(c).find("1 refused by the trainer"), std::string::npos);
}

TEST(MeshAuto, NoFitNamesTheSmallestWorldThatFits) {
  const RunConfig cfg = builtin_run();
  // 11.3 MB: no layout of 2 ranks (the smallest, tp=2 with sequence parallelism, needs 11.50 MB,
  // pp=2 11.78 MB); pp=3 (11.06 MB; the heads, KV heads and the batch of 8 do not split in 3) does.
  const plan::Cluster small = plan::resolve_cluster(cluster_file("small", 0.0113));
  try {
    plan::choose_mesh(cfg, cfg.model, small, 2);
    ADD_FAILURE() << "expected a refusal";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("no layout of 2 ranks fits small's"), std::string::npos) << what;
    EXPECT_NE(what.find("the smallest world that fits is 3 ranks (pp=3,"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos);
  }
  // Far too small for any world: what to change instead.
  try {
    plan::choose_mesh(cfg, cfg.model, plan::resolve_cluster(cluster_file("tiny", 0.001)), 2);
    ADD_FAILURE() << "expected a refusal";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nor does any of up to 64 ranks"), std::string::npos) << e.what();
  }
}

TEST(MeshAuto, ClusterNeedsMeshAuto) {
  const std::string dir = fresh_temp_dir("auto_cluster_alone") + "/run";
  const CommandResult r = run_meshtrain("train --mesh dp=1 --cluster cpu --steps 1 --out " + dir);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("--cluster cpu describes the machine --mesh auto plans for"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir));
}

TEST(MeshAuto, PlanSearchOptionsNeedSearch) {
  const CommandResult r = run_meshtrain("plan --model llama3-8b --mesh fsdp=8 --grad-accum 2");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("--grad-accum shapes the search: give it with --search"), std::string::npos) << r.output;
  // With --search, micro-batches per step fixed at 2: every row's micro-batch is 16 / (dp x fsdp x 2).
  const CommandResult s = run_meshtrain(
      "plan --model llama3-8b --cluster dgx-h100 --devices 8 --search --global-batch 16 --grad-accum 2 "
      "--keep-checkpointing --json --top 50");
  ASSERT_EQ(s.code, 0) << s.output;
  const auto j = nlohmann::json::parse(s.output);
  ASSERT_FALSE(j["top"].empty());
  for (const auto& c : j["top"]) {
    EXPECT_EQ(c["micro_batches"].get<int64_t>(), 2) << c["mesh"].dump();
    EXPECT_FALSE(c["checkpointing"].get<bool>()) << c["mesh"].dump();
  }
}

// ---- real runs ----------------------------------------------------------------------------------

void expect_plans_first_and_trains(int64_t ranks) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string dir = fresh_temp_dir("auto_" + std::to_string(ranks)) + "/run";
  const std::string cluster = cluster_file("roomy", 1.0);
  const AutoRun r = train_auto(ranks, dir, kRun + "--cluster " + cluster);
  ASSERT_EQ(r.rc, 0) << r.output;
  ASSERT_EQ(r.printed_world, ranks) << r.output;
  EXPECT_NE(r.output.find("  runner-up: "), std::string::npos) << r.output;
  EXPECT_EQ(r.chosen.str(), plan_first(ranks, dir + "/model", cluster).str()) << r.output;
  expect_recorded(dir, r.chosen);
  expect_trained(dir);
  // `meshtrain shard` reads the recorded run.toml ([mesh] auto = true beside the sizes) as its mesh.
  const CommandResult shard = run_meshtrain("shard --config " + dir + "/run.toml");
  EXPECT_EQ(shard.code, 0) << shard.output;
  EXPECT_EQ(shard.output.rfind("mesh " + r.chosen.str() + " (", 0), 0u) << shard.output;
}

TEST(MeshAuto, TwoRanksTrainThePlannersFirstLayout) { expect_plans_first_and_trains(2); }
TEST(MeshAuto, FourRanksTrainThePlannersFirstLayout) { expect_plans_first_and_trains(4); }

TEST(MeshAuto, TightMemoryTrainsAnotherLayoutThanTheFastest) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string dir = fresh_temp_dir("auto_tight") + "/run";
  const std::string roomy = cluster_file("roomy", 1.0), tight = cluster_file("tight", 0.013);
  const AutoRun r = train_auto(2, dir, kRun + "--cluster " + tight);
  ASSERT_EQ(r.rc, 0) << r.output;
  const parallel::MeshShape fastest = plan_first(2, dir + "/model", roomy);
  EXPECT_FALSE(same(r.chosen, fastest)) << r.output;
  EXPECT_EQ(r.chosen.str(), plan_first(2, dir + "/model", tight).str()) << r.output;
  EXPECT_NE(r.output.find("  runner-up: " + fastest.str() + ", "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("faster in theory but does not fit"), std::string::npos) << r.output;
  expect_recorded(dir, r.chosen);
  expect_trained(dir);
}

TEST(MeshAuto, NoFittingLayoutIsRefusedBeforeAnythingIsWritten) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string dir = fresh_temp_dir("auto_nofit") + "/run";
  const AutoRun r = train_auto(2, dir, kRun + "--cluster " + cluster_file("small", 0.0113));
  EXPECT_NE(r.rc, 0) << r.output;
  // Every rank says the same one line.
  const std::regex line(R"(meshtrain: error[^\n]*: (--mesh auto: [^\n]*))");
  int lines = 0;
  std::string first;
  for (auto it = std::sregex_iterator(r.output.begin(), r.output.end(), line); it != std::sregex_iterator(); ++it) {
    if (lines++ == 0) first = (*it)[1].str();
    EXPECT_EQ((*it)[1].str(), first);
  }
  EXPECT_GE(lines, 1) << r.output;
  EXPECT_NE(first.find("the smallest world that fits is 3 ranks"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir)) << r.output;
}

TEST(MeshAuto, OneRankHasOneLayout) {
  const std::string dir = fresh_temp_dir("auto_1") + "/run";
  // This machine's memory by default.
  const AutoRun r = train_auto(1, dir, kRun);
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_EQ(r.chosen.str(), "dp=1") << r.output;
  EXPECT_NE(r.output.find("on this machine: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("  runner-up: none (one rank has one layout)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("  background load: runnable now (/proc/stat over 1 s, this job's 1 process excluded)"),
            std::string::npos)
      << r.output;
  expect_recorded(dir, r.chosen);
  expect_trained(dir);
}

// A resume on as many ranks keeps run.toml's choice; on another number of ranks it plans again.
TEST(MeshAuto, ResumeKeepsTheChoiceOrPlansForOtherRanks) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string dir = fresh_temp_dir("auto_resume") + "/run";
  const std::string tight = cluster_file("tight", 0.013);
  const AutoRun first = train_auto(2, dir, kRun + "--cluster " + tight);
  ASSERT_EQ(first.rc, 0) << first.output;
  std::string out;
  ASSERT_EQ(run(mpirun(2) + MESHTRAIN_BINARY + " train --resume " + dir + " --steps 8", &out), 0) << out;
  EXPECT_NE(out.find("mesh auto: " + first.chosen.str() + ", chosen when the run started"), std::string::npos)
      << out;
  expect_recorded(dir, first.chosen);
  ASSERT_EQ(run("OMP_NUM_THREADS=1 " + std::string(MESHTRAIN_BINARY) + " train --resume " + dir + " --steps 10", &out),
            0)
      << out;
  EXPECT_NE(out.find("mesh auto: dp=1 of 1 rank on this machine"), std::string::npos) << out;
  expect_recorded(dir, parallel::MeshShape{});
  EXPECT_EQ(losses(dir).size(), 10u);
}

}  // namespace
}  // namespace mt::testing
