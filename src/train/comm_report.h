// Where a run's communication went, per group of the mesh and per kind of collective: what it
// moved per step, how long this rank was blocked in it (the exposed part: blocking calls and the
// waits of non-blocking ones, from the flight recorder, parallel/checked_comm.h), and the
// transfer time: how long the same bytes take moved alone, measured once the steps are over by
// the same collective on the same group with nothing computing beside it. Hidden = 1 - exposed /
// transfer: the share of the transfer the compute covered.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "parallel/flight_recorder.h"
#include "parallel/mesh.h"

namespace mt {

struct GroupComm {
  std::string group, op;  // "dp+cp", "all_reduce_sum"
  double calls = 0, bytes = 0, exposed_s = 0, transfer_s = 0;  // per step
};

// Collective over the mesh (every rank makes the same probes of the groups it is in, in the same
// order; a group's members made the same collectives, so they agree without a word). `totals`:
// this rank's collectives over `steps` steps. The all-reduces, all-gathers and reduce-scatters
// are probed (the point-to-point traffic of pipelines has its own report); a probe's buffers are
// at most 32 MB, its time scaled to the step's bytes.
std::vector<GroupComm> measure_group_comm(parallel::Mesh& mesh, const parallel::CollectiveTotals& totals,
                                          int64_t steps);

// One line per group and collective: "  dp+cp all_reduce_sum: 14 calls, 497.7 MB, exposed 115.2 ms
// of 1350.4 ms transfer (91% hidden)".
std::string format_group_comm(const std::vector<GroupComm>& figures);

}  // namespace mt
