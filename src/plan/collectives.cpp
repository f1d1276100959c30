#include "plan/collectives.h"

namespace mt::plan {

double ring_all_gather(double bytes, int64_t n, const Link& l) {
  if (n <= 1) return 0.0;
  const double k = double(n - 1);
  return k * l.latency + k / double(n) * bytes / l.bandwidth;
}

double ring_reduce_scatter(double bytes, int64_t n, const Link& l) { return ring_all_gather(bytes, n, l); }

double ring_all_reduce(double bytes, int64_t n, const Link& l) { return 2.0 * ring_all_gather(bytes, n, l); }

double point_to_point(double bytes, const Link& l) { return l.latency + bytes / l.bandwidth; }

// n - 1 messages of S/n each leave a rank, one after another on its link; its own share stays.
double all_to_all(double bytes, int64_t n, const Link& l) { return ring_all_gather(bytes, n, l); }

bool axis_intra_node(const parallel::MeshShape& m, parallel::Axis axis, const Cluster& c) {
  int64_t stride = 1;  // product of the axes that vary faster than `axis`
  // The axes of the rank order (parallel::kAxes, slowest first) after `axis` vary faster.
  for (auto a = parallel::kAxes.rbegin(); a != parallel::kAxes.rend() && *a != axis; ++a) stride *= m.size(*a);
  return stride * m.size(axis) <= c.devices_per_node;
}

Link axis_link(const parallel::MeshShape& m, parallel::Axis axis, const Cluster& c) {
  Link l = axis_intra_node(m, axis, c) ? c.intra : c.inter;
  l.bandwidth *= c.link_efficiency;
  return l;
}

}  // namespace mt::plan
