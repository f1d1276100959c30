// run_summary.json: what a report of the run needs beyond metrics.jsonl's line per step: every
// rank's peak memory and rank 0's time per op and per collective. Rank 0 writes it at the end of
// a run (docs/report.md, "Reports", lists its keys); a run that stopped early has none, and
// `meshtrain report` says those sections were not recorded.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "parallel/flight_recorder.h"
#include "parallel/pipeline.h"

namespace mt {

struct RunSummaryRecord {
  std::string mesh;                     // "dp=2,fsdp=1,..." as the run was laid out
  std::string mode;                     // "full", "LoRA" or "QLoRA (an NF4 base)"
  int64_t world_size = 1;
  int64_t timed_steps = 0;              // the steps the op and collective times are summed over
  double timed_seconds = 0.0;           // their wall-clock time
  double tokens_per_s = 0.0, mfu = 0.0; // the run's steady state, as the closing line prints
  double peak_flops = 0.0;              // the MFU basis: FLOP/s of one process, the run's one
  // The validation loss this segment started from (the run's start, or its resume) and ended at;
  // NaN (written null) without held-out data.
  double val_loss_start = 0.0, val_loss_end = 0.0;
  std::vector<int64_t> peak_rss_bytes;     // per rank
  std::vector<int64_t> peak_tensor_bytes;  // per rank
  std::map<std::string, double> op_seconds;  // rank 0's, per op (core/profile.h)
  // Rank 0's, per (group, collective); empty on one process, which makes none.
  parallel::CollectiveTotals collectives;
  // Under pp, per rank: its stage and its time in the pipeline over the timed steps; empty without.
  std::vector<std::pair<int64_t, parallel::PipelineTiming>> pipeline;
};

// Writes `r` as JSON to `path` (atomically). Throws mt::Error naming the file on failure.
void write_run_summary(const std::string& path, const RunSummaryRecord& r);

}  // namespace mt
