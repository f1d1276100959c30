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

Link axis_link(const parallel::MeshShape& m, parallel::Axis axis, const Cluster& c) {
  int64_t stride = 1;  // product of the axes that vary faster than `axis`
  for (parallel::Axis a : {parallel::Axis::tp, parallel::Axis::cp, parallel::Axis::fsdp, parallel::Axis::dp,
                           parallel::Axis::pp}) {
    if (a == axis) break;
    stride *= m.size(a);
  }
  const bool intra = stride * m.size(axis) <= c.devices_per_node;
  Link l = intra ? c.intra : c.inter;
  l.bandwidth *= c.link_efficiency;
  return l;
}

}  // namespace mt::plan
