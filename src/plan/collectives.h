// Ring collectives under the alpha-beta model: a message of S bytes over a link of latency a and
// bandwidth B costs a + S/B. A ring over n ranks moves (n-1)/n of the buffer through every link.
//   all-gather, reduce-scatter: (n-1)·a + (n-1)/n · S/B   (S = the whole gathered buffer)
//   all-reduce (reduce-scatter + all-gather): 2·(n-1)·a + 2·(n-1)/n · S/B
//   point-to-point: a + S/B
#pragma once
#include <cstdint>

#include "parallel/mesh.h"
#include "plan/hardware.h"

namespace mt::plan {

double ring_all_gather(double bytes, int64_t n, const Link& link);
double ring_reduce_scatter(double bytes, int64_t n, const Link& link);
double ring_all_reduce(double bytes, int64_t n, const Link& link);
double point_to_point(double bytes, const Link& link);

// The link a group along `axis` uses, at the achievable fraction of its bandwidth: the intra-node
// link when the group's ranks lie within one node (rank order tp fastest, then cp, fsdp, dp, pp:
// the group spans stride x size consecutive ranks; a cp group is intra-node when cp x tp ranks
// fit in a node), otherwise the inter-node link.
Link axis_link(const parallel::MeshShape& mesh, parallel::Axis axis, const Cluster& cluster);

}  // namespace mt::plan
