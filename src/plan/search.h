// Strategy search: every layout (dp, fsdp, tp, pp, cp where 2 cp divides the sequence, and for a
// mixture of experts ep where it divides the experts; no tp for a mixture of experts, which the
// trainer does not split over tp yet),
// micro-batch and checkpointing choice for a device count that the model and batch divide,
// evaluated with the memory and time models; the fitting ones ranked by predicted tokens/s.
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

// What the search varies besides the mesh.
struct SearchSpace {
  // > 0: every layout runs this many micro-batches per step, its micro-batch following from its
  // data-parallel ranks (global batch / (dp x fsdp x ep x grad_accum); a layout it does not divide is
  // invalid), as the trainer's train.grad_accum fixes them. 0: the micro-batch is searched, over
  // the powers of two up to the per-rank batch (at most max_micro_batch).
  int64_t grad_accum = 0;
  int64_t max_micro_batch = 64;
  bool vary_checkpointing = true;  // false: base.checkpointing only
};

// The most devices a search lays out: past any machine built (the largest have ~10^5 GPUs), and
// small enough that the factorisations of every count up to it are enumerated in seconds.
inline constexpr int64_t kMaxSearchDevices = int64_t(1) << 20;

// The most meshes a search prices (each with its micro-batches and checkpointing choices); more is
// refused in one line before any is priced.
inline constexpr int64_t kMaxSearchMeshes = 20000;

// What a search may spend pricing, in units of about a nanosecond on one core of this project's
// machine: a candidate costs about a millisecond (a 405B model's stage parameters), and a
// pipeline shape pp x pp x micro-batches steps once, each about 10 ns with the schedule tables
// it allocates (a global batch of 2^22 over 1024 devices ran past a minute). Past about a minute (a 1024-device search of
// a 405B model with a global batch of 16384 was measured at 23 s and is estimated at 56 s) the
// search is refused in one line before any layout is priced.
inline constexpr double kSearchWorkPerCandidate = 1e6;
inline constexpr double kSearchWorkPerPipelineStep = 10;
inline constexpr double kSearchWorkPerSecond = 1e9;
inline constexpr double kMaxSearchWork = 60 * kSearchWorkPerSecond;

// Keeps base's model, mode, precision, sequence, global batch, ZeRO level and cluster; varies the
// mesh over all factorisations of `devices`, and the micro-batch and checkpointing as `space` says.
SearchResult search_layouts(const PlanInput& base, int64_t devices, const SearchSpace& space = {});

}  // namespace mt::plan
