// The planner prices this machine as it is: ranks placed on one host share its cores, memory
// bandwidth and a shared-memory link (hardware.h rank_share, the `cpu` preset), nothing of their
// communication hides behind compute there, and `--mesh auto` on 2 real ranks picks and runs the
// planner's cheapest layout (how fast it measures is scripts/bench_auto_mesh.sh's to print).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include <unistd.h>

#include "core/error.h"
#include "core/host_load.h"
#include "mesh_runs.h"
#include "plan/auto_mesh.h"
#include "plan/run_memory.h"
#include "train/run_config.h"
#include "temp_dirs.h"

namespace mt::testing {
namespace {

namespace fs = std::filesystem;

TEST(PlanHost, RankShareDividesTheHost) {
  const plan::Cluster host = plan::cluster_preset("cpu");
  ASSERT_EQ(host.host_cores, 2);
  const plan::Cluster one = plan::rank_share(host, 1);
  EXPECT_EQ(one.peak_flops, host.peak_flops);
  const plan::Cluster two = plan::rank_share(host, 2);
  EXPECT_DOUBLE_EQ(two.peak_flops, host.peak_flops / 2);
  EXPECT_DOUBLE_EQ(two.memory_bandwidth, host.memory_bandwidth / 2);
  EXPECT_EQ(two.devices_per_node, 2);
  EXPECT_DOUBLE_EQ(two.intra.bandwidth, host.intra.bandwidth);  // a core each: the measured link
  EXPECT_DOUBLE_EQ(two.intra.latency, host.intra.latency);
  // Four ranks on two cores: the copies share the cores, and a hop waits a scheduler slice when
  // its receiver is one of the two ranks (of the three others) without a core.
  const plan::Cluster four = plan::rank_share(host, 4);
  EXPECT_DOUBLE_EQ(four.peak_flops, host.peak_flops / 4);
  EXPECT_DOUBLE_EQ(four.intra.bandwidth, host.intra.bandwidth / 2);
  EXPECT_DOUBLE_EQ(four.intra.latency, host.intra.latency + host.oversubscribed_hop * 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(four.inter.latency, four.intra.latency);
  // Two ranks beside three processes of other work: five runnable on two cores, a fair share each,
  // and a hop waits a slice when its receiver is one of the three of the four others without a core.
  plan::Cluster loaded = host;
  loaded.host_load = 3;
  const plan::Cluster busy = plan::rank_share(loaded, 2);
  EXPECT_DOUBLE_EQ(busy.peak_flops, host.peak_flops / 2 * (2.0 / 5.0));
  EXPECT_DOUBLE_EQ(busy.intra.bandwidth, host.intra.bandwidth * 2.0 / 5.0);
  EXPECT_DOUBLE_EQ(busy.intra.latency, host.intra.latency + host.oversubscribed_hop * 3.0 / 4.0);
  // One rank beside one process: the core left.
  loaded.host_load = 1;
  EXPECT_DOUBLE_EQ(plan::rank_share(loaded, 1).peak_flops, host.peak_flops / 2);
  EXPECT_DOUBLE_EQ(plan::rank_share(loaded, 1).intra.latency, host.intra.latency);
  // Accelerators are not shared: unchanged.
  const plan::Cluster dgx = plan::cluster_preset("dgx-h100");
  EXPECT_EQ(plan::rank_share(dgx, 8).peak_flops, dgx.peak_flops);
  EXPECT_EQ(plan::rank_share(dgx, 8).intra.latency, dgx.intra.latency);
}

// The built-in run (128 wide, 4 blocks) at seq 128, batch 8, on this machine's cluster.
RunConfig builtin_run() {
  return parse_run_config(default_run_config_toml(), {"train.seq_len=128", "train.batch_size=8"});
}

plan::PlanInput host_input(const RunConfig& cfg, const parallel::MeshShape& mesh) {
  RunConfig one = cfg;
  one.mesh = {};
  plan::PlanInput in = plan::run_plan_input(one, cfg.model, 1e9);
  in.cluster = plan::cluster_preset("cpu");
  in.mesh = mesh;
  in.micro_batch = in.global_batch / in.data_parallel();
  return in;
}

// The probe of issue 31 measured the built-in run slower on 8 ranks than on 2 and 4 here (689 ms a
// step on 8); priced as separate devices, 8 ranks looked 4x faster than 2. On one host the same
// work shares the same cores: more ranks add communication, never compute.
TEST(PlanHost, MoreRanksOnTheHostAreNotPricedFaster) {
  const RunConfig cfg = builtin_run();
  plan::SearchSpace space;
  space.grad_accum = 1;
  space.vary_checkpointing = false;
  std::map<int64_t, double> best;
  for (int64_t n : {1, 2, 4, 8}) {
    const plan::SearchResult r = plan::search_layouts(host_input(cfg, {}), n, space);
    ASSERT_FALSE(r.ranked.empty()) << n;
    best[n] = r.ranked.front().time.step;
  }
  EXPECT_LT(best[2], best[4]);
  EXPECT_LT(best[4], best[8]);
  EXPECT_GT(best[8], 2.0 * best[2]);
  // The compute of the step is the host's either way.
  const auto one = plan::step_time(host_input(cfg, {1, 1, 1, 1}));
  const auto dp2 = plan::step_time(host_input(cfg, {2, 1, 1, 1}));
  EXPECT_NEAR(dp2.compute, one.compute, 1e-9 * one.compute);
}

TEST(PlanHost, NothingHidesOnASharedHost) {
  const RunConfig cfg = builtin_run();
  for (const parallel::MeshShape& mesh : {parallel::MeshShape{2, 1, 1, 1}, parallel::MeshShape{1, 2, 1, 1}}) {
    plan::PlanInput in = host_input(cfg, mesh);
    const auto t = plan::step_time(in);
    EXPECT_GT(t.dp + t.fsdp, 0.0) << mesh.str();
    EXPECT_DOUBLE_EQ(t.dp_exposed, t.dp) << mesh.str();
    EXPECT_DOUBLE_EQ(t.fsdp_exposed, t.fsdp) << mesh.str();
    // The same host with communication that hides (comm_overlap = 1, as on accelerators).
    in.cluster.comm_overlap = 1.0;
    in.dp_bucket_bytes = 1e5;  // several buckets
    const auto hidden = plan::step_time(in);
    EXPECT_LT(hidden.dp_exposed + hidden.fsdp_exposed, t.dp_exposed + t.fsdp_exposed) << mesh.str();
  }
}

std::string write_toml(const std::string& name, const std::string& extra) {
  static const fs::path dir = fresh_temp_dir("host_clusters");
  const fs::path path = dir / (name + ".toml");
  std::ofstream(path) << "name = \"" << name << "\"\ndevices_per_node = 1\npeak_tflops = 0.6\nmemory_gb = 8\n"
                      << "memory_bandwidth_gbs = 40\n" << extra
                      << "[intra]\nbandwidth_gbs = 2\nlatency_us = 1\n[inter]\nbandwidth_gbs = 2\nlatency_us = 1\n";
  return path.string();
}

TEST(PlanHost, ClusterTomlDescribesASharedHost) {
  const plan::Cluster c =
      plan::resolve_cluster(write_toml("host", "host_cores = 4\noversubscribed_hop_us = 3000\ncomm_overlap = 0.2\n"));
  EXPECT_EQ(c.host_cores, 4);
  EXPECT_DOUBLE_EQ(c.oversubscribed_hop, 3e-3);
  EXPECT_DOUBLE_EQ(c.comm_overlap, 0.2);
  EXPECT_EQ(plan::resolve_cluster(write_toml("plain", "")).host_cores, 0);
  EXPECT_EQ(plan::resolve_cluster(write_toml("plain", "")).comm_overlap, 1.0);
  // Bad values: one line through the binary, naming the key, non-zero exit.
  const std::pair<const char*, const char*> bad[] = {
      {"comm_overlap = 1.5\n", "'comm_overlap' must be a fraction between 0 and 1"},
      {"host_cores = 1.5\n", "'host_cores' must be a whole number of cores"},
      {"host_cores = 0\n", "'host_cores' must be > 0"},
      {"oversubscribed_hop_us = 4000\n", "'oversubscribed_hop_us' describes a shared host: give host_cores too"},
      {"host_core = 2\n", "unknown key 'host_core'"},
      {"host_cores = 2\nhost_load = -1\n", "'host_load' must be a number >= 0"},
      {"host_load = 1\n", "'host_load' describes a shared host: give host_cores too"},
  };
  int i = 0;
  for (const auto& [extra, why] : bad) {
    const CommandResult r = run_meshtrain("plan --model llama3-8b --mesh dp=1 --cluster " +
                                          write_toml("bad" + std::to_string(i++), extra));
    EXPECT_NE(r.code, 0) << extra;
    EXPECT_NE(r.output.find(why), std::string::npos) << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  }
}

TEST(PlanHost, HostLoadIsRefusedWhereNoHostIsShared) {
  const CommandResult r = run_meshtrain("plan --model llama3-8b --mesh dp=8 --cluster dgx-h100 --host-load 2");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("--host-load prices processes sharing a host's cores: cluster 'dgx-h100' is not a shared host"),
            std::string::npos)
      << r.output;
  // A loaded host is priced slower than an idle one.
  auto step = [](const std::string& load) {
    const CommandResult p =
        run_meshtrain("plan --model llama3-8b --cluster cpu --mesh fsdp=2 --seq 256 --json --host-load " + load);
    EXPECT_EQ(p.code, 0) << p.output;
    return nlohmann::json::parse(p.output)["time_s"]["step"].get<double>();
  };
  EXPECT_GT(step("4"), 2.0 * step("0"));
}

TEST(PlanHost, BadHostLoadIsOneLine) {
  const std::string dir = fresh_temp_dir("host_bad_load") + "/run";
  const CommandResult r = run_command("MESHTRAIN_HOST_LOAD=lots " + std::string(MESHTRAIN_BINARY) + " train --mesh auto --steps 1 --out " + dir);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("MESHTRAIN_HOST_LOAD must be a number >= 0 (processes of other work on this host), got 'lots'"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(dir));
}

TEST(PlanHost, PlanSharesTheHostsMemoryAmongItsRanks) {
  for (const std::string mesh : {"dp=1", "dp=2", "fsdp=4"}) {
    const CommandResult r =
        run_meshtrain("plan --model llama3-8b --cluster cpu --mesh " + mesh + " --seq 256 --json");
    ASSERT_EQ(r.code, 0) << r.output;
    const auto j = nlohmann::json::parse(r.output);
    const double ranks = double(parallel::MeshShape::parse(mesh).world());
    EXPECT_DOUBLE_EQ(j["memory_bytes"]["capacity"].get<double>(), 24e9 / ranks) << mesh;
  }
  // train --mesh auto --cluster cpu: the same share; an accelerator's memory is its own.
  EXPECT_DOUBLE_EQ(plan::run_cluster("cpu", "cpu", AvailableMemory{-1, ""}, 4).memory_bytes, 24e9 / 4);
  EXPECT_DOUBLE_EQ(plan::run_cluster("dgx-h100", "cpu", AvailableMemory{-1, ""}, 4).memory_bytes,
                   plan::cluster_preset("dgx-h100").memory_bytes);
}

// ---- the background load --mesh auto reads (core/host_load.h) ----------------------------------

TEST(PlanHost, ProcStatRunnableCountIsRead) {
  const std::string stat =
      "cpu  10132153 290696 3084719 46828483 16683 0 25195 0 175628 0\n"
      "cpu0 1393280 32966 572056 13343292 6130 0 17875 0 23933 0\n"
      "intr 1462898 28 9 0 0 0 0 0 0 1 0\n"
      "ctxt 1990473\nbtime 1062191376\nprocesses 2915\n"
      "procs_running 5\nprocs_blocked 1\nsoftirq 183433 0 21755 12 39 1137 231 21459 2263\n";
  EXPECT_EQ(parse_procs_running(stat), 5);
  EXPECT_EQ(parse_procs_running("cpu 1 2 3 4\nprocs_blocked 0\n"), -1);
  EXPECT_EQ(parse_procs_running("procs_running x\n"), -1);
  EXPECT_EQ(parse_procs_running(""), -1);
}

TEST(PlanHost, TaskStateIsTheFieldAfterTheCommandName) {
  EXPECT_TRUE(parse_task_running("4242 (meshtrain) R 4241 4242 1 0 -1 4194304 1520"));
  EXPECT_FALSE(parse_task_running("4242 (meshtrain) S 4241 4242 1 0 -1 4194304 1520"));
  EXPECT_FALSE(parse_task_running("4242 (meshtrain) D 4241"));
  // A command name may hold spaces and parentheses: the state follows the last ')'.
  EXPECT_TRUE(parse_task_running("17 (a) S (b)) R 1 17"));
  EXPECT_FALSE(parse_task_running("17 (x R) S 1 17"));
  EXPECT_FALSE(parse_task_running(""));
  EXPECT_FALSE(parse_task_running("17 (cut"));
}

TEST(PlanHost, LoadAverageIsOnlyTheFallback) {
  EXPECT_DOUBLE_EQ(parse_load_average_15("0.75 2.77 3.34 2/412 26346\n"), 3.34);
  EXPECT_LT(parse_load_average_15("garbage"), 0.0);
}

TEST(PlanHost, ThisJobsRunnableTasksAreNotOtherWork) {
  // Two ranks busy-waiting and the reader (3 of this job's tasks runnable at each sample), with one
  // process of other work that runs half the time: 0.5 processes of other work.
  std::vector<RunnableSample> samples;
  for (int i = 0; i < 10; ++i) samples.push_back({i % 2 == 0 ? 4 : 3, 3});
  EXPECT_DOUBLE_EQ(other_work_from_samples(samples), 0.5);
  // Only this job running: nothing, even where a sample counts its own tasks between the host's
  // count and theirs (never below 0).
  EXPECT_DOUBLE_EQ(other_work_from_samples({{2, 2}, {1, 2}, {3, 3}}), 0.0);
  // More runnable than cores is counted as such (the C / P share of rank_share).
  EXPECT_DOUBLE_EQ(other_work_from_samples({{7, 1}, {7, 1}}), 6.0);
  // Unreadable samples are left out; none readable: -1.
  EXPECT_DOUBLE_EQ(other_work_from_samples({{-1, 0}, {5, 1}}), 4.0);
  EXPECT_LT(other_work_from_samples({{-1, 0}}), 0.0);
  EXPECT_LT(other_work_from_samples({}), 0.0);
  // Rounded to a tenth of a process.
  EXPECT_DOUBLE_EQ(other_work_from_samples({{1, 0}, {0, 0}, {0, 0}}), 0.3);
}

TEST(PlanHost, ReadingHereSaysWhatItRead) {
  // The value depends on what else runs on this machine: only its form is checked.
  const HostLoad h = read_host_load({int64_t(::getpid())}, 0.05, 5);
  EXPECT_GE(h.load, 0.0);
  EXPECT_EQ(h.source, "runnable now (/proc/stat over 0.05 s, this job's 1 process excluded)");
}

// ---- a real run: --mesh auto's pick on 2 ranks here -----------------------------------------------

// What the pick measures against the alternatives is judged by scripts/bench_auto_mesh.sh, which
// prints its figures (docs/planner.md); a unit test asserting tokens/s fails on a shared machine
// whenever other work comes and goes (the CI run of 2026-12-06 measured dp=2 at 0.67 of cp=2).
// Here: the pick a real 2-rank `train --mesh auto` makes and runs is the planner's cheapest layout
// at the host and load it printed.
TEST(PlanHost, TwoRanksPickIsThePlannersCheapestAtTheLoadItRead) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string dir = fresh_temp_dir("host_pick");
  std::string out;
  ASSERT_EQ(run(mpirun(2) + MESHTRAIN_BINARY +
                    " train --mesh auto --steps 2 --set train.seq_len=64 --set train.batch_size=4 "
                    "--set train.threads=1 --set output.checkpoint_every=0 --out " + dir + "/auto",
                &out),
            0)
      << out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(mesh auto: (\S+) of 2 ranks on this machine)"))) << out;
  const std::string pick = m[1].str();
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(\n  host: \d+ cores, background load ([0-9.e+]+), 2 ranks)")))
      << out;
  const double load = std::stod(m[1].str());
  // Read by rank 0 for both, each rank's process excluded (the ranks agreed: the run trained).
  EXPECT_NE(out.find("\n  background load: runnable now (/proc/stat over 1 s, this job's 2 processes excluded)\n"),
            std::string::npos)
      << out;
  ASSERT_TRUE(std::regex_search(out, std::regex(R"(\nthroughput: \d+ tokens/s)"))) << out;

  RunConfig cfg = builtin_run();
  cfg.train.seq_len = 64;
  cfg.train.batch_size = 4;
  plan::SearchSpace space;
  space.grad_accum = 1;
  space.vary_checkpointing = false;
  plan::PlanInput base = host_input(cfg, {});
  base.cluster = plan::run_cluster("", "cpu", AvailableMemory{-1, ""}, 2, load);
  const plan::SearchResult priced = plan::search_layouts(base, 2, space);
  ASSERT_FALSE(priced.ranked.empty());
  EXPECT_EQ(priced.ranked.front().input.mesh.str(), pick) << out;
}

}  // namespace
}  // namespace mt::testing
