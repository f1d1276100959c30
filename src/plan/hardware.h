// The machines a run can be planned for: per-device peak compute and memory, and the links that
// collectives use. Presets are public datasheet figures; a TOML file describes anything else.
// Efficiency constants (what fraction of a datasheet peak real kernels reach) live here, per
// cluster, so every number the time model uses is named and documented in docs/planner.md.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mt::plan {

struct Link {
  double bandwidth = 0.0;  // bytes/s one device can send (and receive) at once over this link
  double latency = 0.0;    // seconds per message hop (the alpha of the alpha-beta model)
};

struct Cluster {
  std::string name;
  int64_t devices_per_node = 8;
  double peak_flops = 0.0;         // dense bf16 FLOP/s per device (the MFU denominator)
  double memory_bytes = 0.0;       // per device
  double memory_bandwidth = 0.0;   // bytes/s per device (optimizer step, elementwise ops)
  Link intra;                      // between devices of one node
  Link inter;                      // between nodes, per device (node injection bandwidth / devices)
  // Achievable fractions (see docs/planner.md, "Efficiency constants"):
  double gemm_efficiency = 0.7;    // of peak, for a large GEMM (smallest dimension >> gemm_half_dim)
  double gemm_half_dim = 128.0;    // smallest GEMM dimension at which half of gemm_efficiency is reached
  double attention_efficiency = 0.4;  // flash attention, of peak
  double link_efficiency = 0.75;   // of nominal link bandwidth, reached by ring collectives
  double runtime_overhead_bytes = 0.0;  // runtime context, kernels, allocator slack per device
};

// "mi300x-node", "frontier", "dgx-h100", "dgx-h200", "cpu". Throws mt::Error listing the names.
Cluster cluster_preset(const std::string& name);
std::vector<std::string> cluster_preset_names();

// TOML: name, devices_per_node, peak_tflops, memory_gb, memory_bandwidth_gbs,
// [intra] / [inter] bandwidth_gbs + latency_us, optional efficiency keys (as in Cluster) and
// runtime_overhead_gb. Unknown keys and non-positive sizes are errors naming the key.
Cluster parse_cluster_toml(const std::string& text, const std::string& where);
// A preset name, or a path ending in .toml.
Cluster resolve_cluster(const std::string& name_or_path);

}  // namespace mt::plan
