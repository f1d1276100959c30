// The whole run's figures from metrics.jsonl, over every segment (a resumed run's starts): its
// elapsed time and its throughput, where run_summary.json has only the last segment's.
#pragma once
#include <cstdint>

#include "report/run_data.h"

namespace mt::report {

struct RunTotals {
  // The segments' elapsed times summed (each from its start to its last recorded step).
  double elapsed_s = 0.0;
  // Over the steps after each segment's first (which builds the GEMM primitives; a segment of one
  // step counts that one), as the trainer times its steady state: tokens over the steps' own time,
  // and MFU weighted by that time. NaN when no line records its step time (older runs).
  double tokens_per_s, mfu;
  int64_t timed_steps = 0;
};

RunTotals run_totals(const RunData& run);

}  // namespace mt::report
