// Strategy search: every layout (dp, fsdp, tp, pp), micro-batch and checkpointing choice for a
// device count that the model and batch divide, evaluated with the memory and time models; the
// fitting ones ranked by predicted tokens/s.
#pragma once
#include <cstdint>
#include <vector>

#include "plan/memory_model.h"
#include "plan/time_model.h"

namespace mt::plan {

struct Candidate {
  PlanInput input;
  MemoryBreakdown memory;
  TimeBreakdown time;
};

struct SearchResult {
  std::vector<Candidate> ranked;     // layouts that fit, fastest first
  std::vector<Candidate> too_big;    // layouts that divide but do not fit (for the front's picture)
  int64_t considered = 0;            // (mesh, micro-batch, checkpointing) tuples tried
  int64_t invalid = 0;               // meshes the model or batch did not divide (skipped)
};

// Keeps base's model, mode, precision, sequence, global batch, ZeRO level and cluster; varies the
// mesh over all factorisations of `devices`, the micro-batch over the powers of two up to the
// per-rank batch (at most `max_micro_batch`), and checkpointing on/off.
SearchResult search_layouts(const PlanInput& base, int64_t devices, int64_t max_micro_batch = 64);

}  // namespace mt::plan
