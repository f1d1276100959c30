#include "train/comm_report.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

namespace mt {

namespace {

using parallel::AxisSet;
using parallel::Comm;

constexpr double kProbeBytes = 32e6;  // buffers of one probe call, at most
constexpr int64_t kProbeCalls = 4;    // timed calls per probe, after one untimed

// Seconds one call of `op` on `group` takes for `block` bytes per rank (f32 elements), the best of
// kProbeCalls after a warm-up.
double probe(Comm& group, const std::string& op, int64_t block_floats) {
  const int64_t n = group.size();
  std::vector<float> in(size_t(op == "all_gather" ? block_floats : block_floats * (op == "reduce_scatter_sum" ? n : 1)), 1.0f);
  std::vector<float> out(size_t(op == "all_gather" ? block_floats * n : block_floats));
  auto once = [&] {
    if (op == "all_reduce_sum") group.all_reduce_sum(in.data(), block_floats);
    else if (op == "all_gather") group.all_gather(in.data(), out.data(), block_floats);
    else group.reduce_scatter_sum(in.data(), out.data(), block_floats);
  };
  once();
  double best = 1e30;
  for (int64_t i = 0; i < kProbeCalls; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    once();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

std::vector<GroupComm> measure_group_comm(parallel::Mesh& mesh, const parallel::CollectiveTotals& totals,
                                          int64_t steps) {
  std::vector<GroupComm> out;
  if (steps <= 0) return out;
  for (AxisSet set = 1; set < (1u << parallel::kNumAxes); ++set) {
    Comm& group = mesh.group(set);
    if (group.size() == 1) continue;
    for (const char* op : {"all_reduce_sum", "all_gather", "reduce_scatter_sum"}) {
      const auto it = totals.find({group.name(), op});
      if (it == totals.end() || it->second.calls == 0 || it->second.bytes == 0) continue;
      const parallel::CollectiveTotal& t = it->second;
      GroupComm g;
      g.group = group.name(), g.op = op;
      g.calls = double(t.calls) / double(steps);
      g.bytes = double(t.bytes) / double(steps);
      g.exposed_s = t.seconds / double(steps);
      // The probe's block: the mean call's, capped so that its buffers stay under kProbeBytes.
      const double per_call = double(t.bytes) / double(t.calls);
      const double buffers = std::string(op) == "all_reduce_sum" ? 1.0 : double(group.size());
      const int64_t block = std::max<int64_t>(1, int64_t(std::min(per_call, kProbeBytes / buffers) / 4.0));
      g.transfer_s = probe(group, op, block) / (double(block) * 4.0) * g.bytes;
      out.push_back(g);
    }
  }
  return out;
}

std::string format_group_comm(const std::vector<GroupComm>& figures) {
  std::string s;
  char line[256];
  for (const GroupComm& g : figures) {
    const double hidden = g.transfer_s > 0 ? std::max(0.0, 1.0 - g.exposed_s / g.transfer_s) : 0.0;
    std::snprintf(line, sizeof line,
                  "  %s %s: %.1f calls, %.1f MB, exposed %.1f ms of %.1f ms transfer (%.0f%% hidden)\n",
                  g.group.c_str(), g.op.c_str(), g.calls, g.bytes / 1e6, g.exposed_s * 1e3, g.transfer_s * 1e3,
                  hidden * 100.0);
    s += line;
  }
  return s;
}

}  // namespace mt
