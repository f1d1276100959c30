// Ring collectives under the alpha-beta model: a message of S bytes over a link of latency a and
// bandwidth B costs a + S/B. A ring over n ranks moves (n-1)/n of the buffer through every link.
//   all-gather, reduce-scatter: (n-1)·a + (n-1)/n · S/B   (S = the whole gathered buffer)
//   all-reduce (reduce-scatter + all-gather): 2·(n-1)·a + 2·(n-1)/n · S/B
//   point-to-point: a + S/B
//   all-to-all (each rank sends S/n to each other rank, pairs exchanging at once, as MPI point-to-
//   point pairs or one NCCL group of sends and receives do): (n-1)·a + (n-1)/n · S/B
//   (S = the rank's whole send buffer, its own share included)
#pragma once
#include <cstdint>

#include "parallel/mesh.h"
#include "plan/hardware.h"

namespace mt::plan {

double ring_all_gather(double bytes, int64_t n, const Link& link);
double ring_reduce_scatter(double bytes, int64_t n, const Link& link);
double ring_all_reduce(double bytes, int64_t n, const Link& link);
double point_to_point(double bytes, const Link& link);
double all_to_all(double bytes, int64_t n, const Link& link);

// The link a group along `axis` uses, at the achievable fraction of its bandwidth: the intra-node
// link when the group's ranks lie within one node (rank order tp fastest, then cp, ep, fsdp, dp,
// pp: parallel/mesh.h; the group spans stride x size consecutive ranks, so a cp group is
// intra-node when cp x tp ranks fit in a node, an ep group when ep x cp x tp do), otherwise the
// inter-node link.
Link axis_link(const parallel::MeshShape& mesh, parallel::Axis axis, const Cluster& cluster);
// Whether that group lies within one node.
bool axis_intra_node(const parallel::MeshShape& mesh, parallel::Axis axis, const Cluster& cluster);

}  // namespace mt::plan
