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
  // Fraction of the fsdp gathers / reduce-scatters and of the dp reduction that may hide behind
  // compute (when the plan overlaps at all): 1 on accelerators, whose links move bytes without the
  // compute units; on a shared host what docs/distributed.md "Overlap" measures (none, net).
  double comm_overlap = 1.0;
  // A shared host (host_cores > 0): the cluster is one machine whose processes (the ranks) share
  // its cores. peak_flops and memory_bandwidth are then the whole host's, `intra` is the
  // shared-memory link between two ranks with a core each (`meshtrain bench --what p2p`), and
  // rank_share() gives what each of R ranks placed on it gets. 0: devices are separate accelerators.
  int64_t host_cores = 0;
  // Shared host: seconds a message waits when its receiver has no core to run on (more ranks than
  // cores): the scheduler's time slice, measured as the one-way time of `bench --what p2p` with
  // both ranks on one core (taskset -c 0 mpirun -n 2 ...).
  double oversubscribed_hop = 0.0;
  // Shared host: processes of other work runnable beside the run's ranks (where the run is planned
  // on this host, those runnable now, core/host_load.h; 0 on an idle host). They take their share
  // of the cores.
  double host_load = 0.0;
  // How host_load was had, for the log of `--mesh auto` ("runnable now ...", "MESHTRAIN_HOST_LOAD");
  // empty where it was given with the cluster.
  std::string host_load_source;
};

// What one of `ranks` ranks on a shared host gets (the cluster itself when it is not one). With
// P = ranks + host_load runnable processes on C cores: a rank's cores are (C - host_load) / ranks
// while P <= C, else C / P (the scheduler's fair share), and the host's GEMM rate per core times
// those; 1/ranks of the memory bandwidth; all ranks on one node whose links are the shared-memory
// link, its bandwidth times min(1, C / P) (the copies run on the cores), each hop waiting
// oversubscribed_hop x (P - C) / (P - 1) more when P > C (the chance that the receiver is one of
// the processes without a core). Memory is left as given.
Cluster rank_share(const Cluster& host, int64_t ranks);

// "mi300x-node", "frontier", "dgx-h100", "dgx-h200", "cpu". Throws mt::Error listing the names.
Cluster cluster_preset(const std::string& name);
std::vector<std::string> cluster_preset_names();

// TOML: name, devices_per_node, peak_tflops, memory_gb, memory_bandwidth_gbs,
// [intra] / [inter] bandwidth_gbs + latency_us, optional efficiency keys (as in Cluster) and
// runtime_overhead_gb, comm_overlap, and for a shared host host_cores, oversubscribed_hop_us and
// host_load.
// Unknown keys and non-positive sizes are errors naming the key.
Cluster parse_cluster_toml(const std::string& text, const std::string& where);
// A preset name, or a path ending in .toml.
Cluster resolve_cluster(const std::string& name_or_path);

}  // namespace mt::plan
