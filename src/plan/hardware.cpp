#include "plan/hardware.h"

#include "core/toml.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>
#include <vector>

#include "core/did_you_mean.h"
#include "core/error.h"
#include "core/regular_file.h"

namespace mt::plan {
namespace {

constexpr double GB = 1e9, TF = 1e12, us = 1e-6;
// This machine's shared-memory link between two ranks: `bench --what p2p`'s fit (docs/planner.md).
constexpr double kCpuLinkGbs = 2.0, kCpuLinkLatencyUs = 1.0;

// Datasheet figures; the efficiencies are the assumptions stated in docs/planner.md.
Cluster mi300x_node() {
  Cluster c;
  c.name = "mi300x-node";
  c.devices_per_node = 8;
  c.peak_flops = 1307 * TF;
  c.memory_bytes = 192 * GB;
  c.memory_bandwidth = 5300 * GB;
  c.intra = {448 * GB, 10 * us};  // 7 Infinity Fabric links x 64 GB/s, fully connected
  c.inter = {50 * GB, 20 * us};   // one 400 Gb/s NIC per GPU
  c.gemm_efficiency = 0.6;        // hipBLASLt bf16 large GEMMs reach ~ 750-800 TFLOP/s
  c.gemm_half_dim = 256;
  c.attention_efficiency = 0.3;
  c.runtime_overhead_bytes = 1.0 * GB;
  return c;
}

Cluster frontier() {
  Cluster c;
  c.name = "frontier";
  c.devices_per_node = 8;  // 4 MI250X = 8 GCDs
  c.peak_flops = 191.5 * TF;
  c.memory_bytes = 64 * GB;
  c.memory_bandwidth = 1600 * GB;
  c.intra = {50 * GB, 10 * us};    // Infinity Fabric 50 GB/s per direction between GCDs of different cards
  c.inter = {12.5 * GB, 20 * us};  // 4 Slingshot NICs x 25 GB/s per node, shared by 8 GCDs
  c.gemm_efficiency = 0.65;        // rocBLAS bf16 large GEMMs on one GCD ~ 125 TFLOP/s
  c.gemm_half_dim = 256;
  c.attention_efficiency = 0.25;
  c.runtime_overhead_bytes = 1.0 * GB;
  return c;
}

Cluster dgx(const char* name, double mem_gb, double hbm_gbs) {
  Cluster c;
  c.name = name;
  c.devices_per_node = 8;
  c.peak_flops = 989 * TF;
  c.memory_bytes = mem_gb * GB;
  c.memory_bandwidth = hbm_gbs * GB;
  c.intra = {450 * GB, 5 * us};   // NVLink 4: 900 GB/s bidirectional through NVSwitch
  c.inter = {50 * GB, 10 * us};   // 8 x 400 Gb/s InfiniBand, one per GPU
  c.gemm_efficiency = 0.75;       // cuBLAS bf16 large GEMMs ~ 700-750 TFLOP/s
  c.gemm_half_dim = 192;
  c.attention_efficiency = 0.45;  // FlashAttention-2 on H100
  c.runtime_overhead_bytes = 1.0 * GB;
  return c;
}

// This machine: one host of 2 cores of an Intel Xeon with AMX-BF16 (DESIGN.md assumed Zen 4 at
// ~380 GFLOP/s; the project's machines turned out to have AMX), its ranks sharing them.
// peak_flops is the host's typical sustained bf16 GEMM `meshtrain bench` measures (530-930 GFLOP/s
// from run to run on the shared cores, ~610 typical), per rank 1/R of it (rank_share). The link is
// the shared-memory one between two ranks, `bench --what p2p`'s alpha-beta fit here (docs/planner.md,
// "This machine"); a hop whose receiver has no core waits a scheduler slice (4 ms measured with two
// ranks on one core). Communication is priced as not hidden: the ranks' copies and reductions run
// on the cores they compute on (docs/distributed.md, "Overlap": dp=2 exposed 189 ms a step against
// 110 ms of transfer).
Cluster cpu() {
  Cluster c;
  c.name = "cpu";
  c.devices_per_node = 1;
  c.peak_flops = 610e9;
  c.memory_bytes = 24 * GB;
  c.memory_bandwidth = 40 * GB;
  c.intra = {kCpuLinkGbs * GB, kCpuLinkLatencyUs * us};
  c.inter = c.intra;
  c.gemm_efficiency = 0.85;
  c.gemm_half_dim = 48;
  c.attention_efficiency = 0.25;
  c.link_efficiency = 1.0;
  c.runtime_overhead_bytes = 0.1 * GB;
  c.comm_overlap = 0.0;
  c.host_cores = 2;
  c.oversubscribed_hop = 4000 * us;
  return c;
}

}  // namespace

Cluster rank_share(const Cluster& host, int64_t ranks) {
  if (host.host_cores <= 0 || (ranks <= 1 && host.host_load <= 0.0)) return host;  // the whole host
  const double R = double(std::max<int64_t>(1, ranks)), C = double(host.host_cores), B = host.host_load;
  const double P = R + B;
  const double cores = P <= C ? (C - B) / R : C / P;
  Cluster r = host;
  r.peak_flops = host.peak_flops / C * cores;
  r.memory_bandwidth = host.memory_bandwidth / R;
  r.devices_per_node = std::max<int64_t>(1, ranks);
  r.intra.bandwidth = host.intra.bandwidth * std::min(1.0, C / P);
  if (P > C) r.intra.latency += host.oversubscribed_hop * (P - C) / (P - 1.0);
  r.inter = r.intra;
  return r;
}

std::vector<std::string> cluster_preset_names() {
  return {"mi300x-node", "frontier", "dgx-h100", "dgx-h200", "cpu"};
}

Cluster cluster_preset(const std::string& name) {
  if (name == "mi300x-node") return mi300x_node();
  if (name == "frontier") return frontier();
  if (name == "dgx-h100") return dgx("dgx-h100", 80, 3350);
  if (name == "dgx-h200") return dgx("dgx-h200", 141, 4800);
  if (name == "cpu") return cpu();
  std::string known;
  for (const auto& n : cluster_preset_names()) known += (known.empty() ? "" : ", ") + n;
  fail("unknown cluster '" + name + "' (known: " + known + ", or a .toml file)");
}

namespace {

double positive(const toml::table& t, const std::string& key, const std::string& where, bool required,
                double fallback) {
  const toml::node* n = t.get(key);
  if (!n) {
    if (required) fail(where + ": missing key '" + key + "'");
    return fallback;
  }
  auto v = n->value<double>();
  if (!v) fail(where + ": '" + key + "' must be a number");
  if (*v <= 0) fail(where + ": '" + key + "' must be > 0 (got " + std::to_string(*v) + ")");
  return *v;
}

Link parse_link(const toml::table& root, const std::string& section, const std::string& where) {
  const toml::table* t = root.get_as<toml::table>(section);
  if (!t) fail(where + ": missing section [" + section + "]");
  for (const auto& [k, v] : *t)
    if (k != "bandwidth_gbs" && k != "latency_us")
      fail(where + ": unknown key '" + std::string(k.str()) + "' in [" + section + "]" +
           did_you_mean(k.str(), {"bandwidth_gbs", "latency_us"}));
  const std::string w = where + " [" + section + "]";
  return {positive(*t, "bandwidth_gbs", w, true, 0) * GB, positive(*t, "latency_us", w, true, 0) * us};
}

}  // namespace

Cluster parse_cluster_toml(const std::string& text, const std::string& where) {
  toml::table root;
  try {
    root = toml::parse(text, where);
  } catch (const toml::parse_error& e) {
    fail(where + ": " + std::string(e.description()));
  }
  static const std::set<std::string> keys = {
      "name", "devices_per_node", "peak_tflops", "memory_gb", "memory_bandwidth_gbs", "intra",
      "inter", "gemm_efficiency", "gemm_half_dim", "attention_efficiency", "link_efficiency",
      "runtime_overhead_gb", "comm_overlap", "host_cores", "oversubscribed_hop_us", "host_load"};
  for (const auto& [k, v] : root)
    if (!keys.count(std::string(k.str())))
      fail(where + ": unknown key '" + std::string(k.str()) + "'" +
           did_you_mean(k.str(), std::vector<std::string_view>(keys.begin(), keys.end())));
  Cluster c;
  c.name = root["name"].value_or(where);
  c.devices_per_node = int64_t(positive(root, "devices_per_node", where, true, 0));
  c.peak_flops = positive(root, "peak_tflops", where, true, 0) * TF;
  c.memory_bytes = positive(root, "memory_gb", where, true, 0) * GB;
  c.memory_bandwidth = positive(root, "memory_bandwidth_gbs", where, true, 0) * GB;
  c.intra = parse_link(root, "intra", where);
  c.inter = parse_link(root, "inter", where);
  c.gemm_efficiency = positive(root, "gemm_efficiency", where, false, c.gemm_efficiency);
  c.gemm_half_dim = positive(root, "gemm_half_dim", where, false, c.gemm_half_dim);
  c.attention_efficiency = positive(root, "attention_efficiency", where, false, c.attention_efficiency);
  c.link_efficiency = positive(root, "link_efficiency", where, false, c.link_efficiency);
  c.runtime_overhead_bytes = positive(root, "runtime_overhead_gb", where, false, 1.0) * GB;
  for (double f : {c.gemm_efficiency, c.attention_efficiency, c.link_efficiency})
    if (f > 1.0) fail(where + ": efficiencies are fractions of peak and must be <= 1");
  if (const toml::node* n = root.get("comm_overlap")) {
    const auto v = n->value<double>();
    if (!v || !(*v >= 0.0 && *v <= 1.0))
      fail(where + ": 'comm_overlap' must be a fraction between 0 and 1");
    c.comm_overlap = *v;
  }
  if (root.get("host_cores")) {
    const double cores = positive(root, "host_cores", where, true, 0);
    if (cores != double(int64_t(cores))) fail(where + ": 'host_cores' must be a whole number of cores");
    c.host_cores = int64_t(cores);
  }
  c.oversubscribed_hop = positive(root, "oversubscribed_hop_us", where, false, 0.0) * us;
  if (const toml::node* n = root.get("host_load")) {
    const auto v = n->value<double>();
    if (!v || !(*v >= 0.0 && *v < 1e6)) fail(where + ": 'host_load' must be a number >= 0 (runnable processes)");
    c.host_load = *v;
  }
  for (const char* key : {"oversubscribed_hop_us", "host_load"})
    if (root.get(key) && c.host_cores == 0)
      fail(where + ": '" + key + "' describes a shared host: give host_cores too");
  return c;
}

Cluster resolve_cluster(const std::string& s) {
  if (s.size() > 5 && s.substr(s.size() - 5) == ".toml") {
    require_regular_file(s, "cluster file");
    std::ifstream f(s);
    if (!f) fail(s + ": cannot open cluster file");
    std::stringstream ss;
    ss << f.rdbuf();
    return parse_cluster_toml(ss.str(), s);
  }
  return cluster_preset(s);
}

}  // namespace mt::plan
