#include "plan/auto_mesh.h"

#include <algorithm>
#include <cstdio>
#include <thread>
#include <vector>

#include "core/error.h"
#include "plan/run_memory.h"
#include "train/metrics.h"
#include "train/run_layout.h"

namespace mt::plan {
namespace {

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, s < 1.0 ? "%.3g ms" : "%.3g s", s < 1.0 ? s * 1e3 : s);
  return buf;
}

// The run as the search's base: the run's own input on one rank (so the global batch is
// train.batch_size x train.grad_accum), on `cluster`.
PlanInput search_base(const RunConfig& cfg, const ModelConfig& shape, const Cluster& cluster) {
  RunConfig one = cfg;
  one.mesh = {};
  PlanInput in = run_plan_input(one, shape, cluster.memory_bytes);
  in.cluster = cluster;
  return in;
}

SearchSpace run_space(const RunConfig& cfg) {
  SearchSpace space;
  space.grad_accum = cfg.train.grad_accum;
  space.vary_checkpointing = false;  // the run's train.activation_checkpointing
  return space;
}

// The trainer's refusal of the layout, or empty when it accepts it.
std::string refusal(const RunConfig& cfg, const ModelConfig& shape, const parallel::MeshShape& mesh) {
  try {
    check_run_layout(cfg, shape, mesh);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

// The search's layouts the trainer accepts, in the search's order.
struct Accepted {
  std::vector<Candidate> fit, too_big;
  int64_t refused = 0;
  std::string first_refusal;
};

Accepted accepted(const SearchResult& r, const RunConfig& cfg, const ModelConfig& shape) {
  Accepted out;
  auto keep = [&](const std::vector<Candidate>& from, std::vector<Candidate>& to) {
    for (const Candidate& c : from) {
      const std::string why = refusal(cfg, shape, c.input.mesh);
      if (why.empty()) {
        to.push_back(c);
        continue;
      }
      if (out.refused++ == 0) out.first_refusal = c.input.mesh.str() + ": " + why;
    }
  };
  keep(r.ranked, out.fit);
  keep(r.too_big, out.too_big);
  return out;
}

const Candidate* smallest(const std::vector<Candidate>& cs) {
  const auto it = std::min_element(cs.begin(), cs.end(), [](const Candidate& a, const Candidate& b) {
    return a.memory.total < b.memory.total;
  });
  return it == cs.end() ? nullptr : &*it;
}

// What else lowers the memory a rank needs, of what the run has not set yet.
std::string lighter_settings(const RunConfig& cfg) {
  std::string s = cfg.lora.enabled ? "" : "lora.enabled = true, ";
  s += "a smaller train.batch_size or train.seq_len";
  if (!cfg.train.activation_checkpointing) s += ", train.activation_checkpointing = true";
  return s;
}

// The one line for `world` ranks without a fitting layout.
[[noreturn]] void refuse(const RunConfig& cfg, const ModelConfig& shape, const PlanInput& base, int64_t world,
                         const Accepted& here) {
  const std::string ranks = std::to_string(world) + (world == 1 ? " rank" : " ranks");
  const std::string per_rank = bytes_text(base.cluster.memory_bytes) + " per rank";
  std::string what;
  if (const Candidate* s = smallest(here.too_big))
    what = "no layout of " + ranks + " fits " + base.cluster.name + "'s " + per_rank + " (the smallest, " +
           s->input.mesh.str() + ", needs " + bytes_text(s->memory.total) + ")";
  else if (here.refused > 0)
    what = "no layout of " + ranks + " is one the trainer accepts (" + here.first_refusal + ")";
  else
    what = "no layout of " + ranks + " divides the model and train.batch_size";
  const int64_t limit = std::max<int64_t>(64, 8 * world);
  for (int64_t w = world + 1; w <= limit; ++w) {
    const Accepted more = accepted(search_layouts(base, w, run_space(cfg)), cfg, shape);
    if (more.fit.empty()) continue;
    const Candidate& c = more.fit.front();
    fail("--mesh auto: " + what + "; the smallest world that fits is " + std::to_string(w) + " ranks (" +
         c.input.mesh.str() + ", " + bytes_text(c.memory.total) + " per rank at " + per_rank +
         "): launch that many, or lower the memory a rank needs (" + lighter_settings(cfg) + ")");
  }
  fail("--mesh auto: " + what + ", nor does any of up to " + std::to_string(limit) +
       " ranks: lower the memory a rank needs (" + lighter_settings(cfg) + ")");
}

}  // namespace

Cluster run_cluster(const std::string& name_or_path, const std::string& device, const AvailableMemory& available,
                    int64_t ranks_on_host, double host_load) {
  if (!name_or_path.empty()) {
    Cluster c = resolve_cluster(name_or_path);
    // A shared host's memory is the host's: its ranks here share it, as `plan` shares it.
    if (c.host_cores > 0) c.memory_bytes /= double(std::max<int64_t>(1, ranks_on_host));
    return c;
  }
  if (device != "cpu")
    fail("--mesh auto on train.device = " + device + ": the planner has no description of this machine's " +
         device + " devices; give --cluster with a preset (dgx-h100, mi300x-node, ...) or a cluster TOML");
  Cluster c = cluster_preset("cpu");
  // The ranks share this host's cores: the preset's GEMM rate is per core times the cores here
  // (every rank of the host counts the same cores, so all choose alike).
  if (const unsigned cores = std::thread::hardware_concurrency(); cores > 0 && int64_t(cores) != c.host_cores) {
    c.peak_flops *= double(cores) / double(c.host_cores);
    c.host_cores = int64_t(cores);
  }
  c.host_load = std::max(0.0, host_load);
  // Memory unknown: the preset's figure stands.
  if (available.bytes >= 0)
    c.memory_bytes = kUsableMemoryFraction * double(available.bytes) / double(std::max<int64_t>(1, ranks_on_host));
  c.name = "this machine";
  return c;
}

MeshChoice choose_mesh(const RunConfig& cfg, const ModelConfig& shape, const Cluster& cluster, int64_t world) {
  const PlanInput base = search_base(cfg, shape, cluster);
  const Accepted here = accepted(search_layouts(base, world, run_space(cfg)), cfg, shape);
  if (here.fit.empty()) refuse(cfg, shape, base, world, here);
  MeshChoice out;
  out.chosen = here.fit.front();
  out.fit = int64_t(here.fit.size());
  out.too_big = int64_t(here.too_big.size());
  out.refused = here.refused;
  out.first_refusal = here.first_refusal;
  // A layout the time model prefers but the memory does not allow is the runner-up worth naming.
  for (const Candidate& c : here.too_big)
    if (c.time.tokens_per_s > out.chosen.time.tokens_per_s &&
        (!out.runner_up || c.time.tokens_per_s > out.runner_up->time.tokens_per_s))
      out.runner_up = c;
  if (!out.runner_up && here.fit.size() > 1) out.runner_up = here.fit[1];
  return out;
}

std::string describe_choice(const MeshChoice& choice) {
  const Candidate& c = choice.chosen;
  const int64_t world = c.input.mesh.world();
  std::string s = "mesh auto: " + c.input.mesh.str() + " of " + std::to_string(world) +
                  (world == 1 ? " rank" : " ranks") + " on " + c.input.cluster.name + ": " +
                  bytes_text(c.memory.total) + " per rank of " + bytes_text(c.memory.capacity) + ", " +
                  seconds_text(c.time.step) + " a step predicted\n";
  const Cluster& cl = c.input.cluster;
  if (cl.host_cores > 0) {
    const Cluster r = rank_share(cl, world);
    char buf[200];
    std::snprintf(buf, sizeof buf, "  host: %ld cores, background load %.4g, %ld %s: %.2f cores a rank, %.3g GB/s link\n",
                  long(cl.host_cores), cl.host_load, long(world), world == 1 ? "rank" : "ranks",
                  r.peak_flops / cl.peak_flops * double(cl.host_cores), r.intra.bandwidth / 1e9);
    s += buf;
    if (!cl.host_load_source.empty()) s += "  background load: " + cl.host_load_source + "\n";
  }
  if (!choice.runner_up) {
    s += "  runner-up: none (" + std::string(world == 1 ? "one rank has one layout" : "the only layout that fits") +
         ")\n";
  } else {
    const Candidate& r = *choice.runner_up;
    s += "  runner-up: " + r.input.mesh.str() + ", ";
    if (!r.memory.fits()) {
      char pct[32];
      std::snprintf(pct, sizeof pct, "%.0f%%", 100.0 * (r.time.tokens_per_s / c.time.tokens_per_s - 1.0));
      s += std::string(pct) + " faster in theory but does not fit: " + bytes_text(r.memory.total) + " per rank\n";
    } else {
      char pct[32];
      std::snprintf(pct, sizeof pct, "%.1f%%", 100.0 * (r.time.step / c.time.step - 1.0));
      s += std::string(pct) + " slower (" + seconds_text(r.time.step) + " a step)\n";
    }
  }
  s += "  searched: " + std::to_string(choice.fit) + " fit, " + std::to_string(choice.too_big) + " too big, " +
       std::to_string(choice.refused) + " refused by the trainer" +
       (choice.first_refusal.empty() ? "" : " (" + choice.first_refusal + ")") + "\n";
  return s;
}

}  // namespace mt::plan
