// What the CPU backend's attention kernels allocate beside the model's arenas (per-thread tiles,
// the backward's row terms and dQ accumulators), for the planner, whose floor may not include the
// kernels (docs/architecture.md). The kernels' own count: kernels/cpu/attention.h.
#pragma once
#include <algorithm>
#include <cstdint>

#include "kernels/cpu/attention.h"

namespace mt {

// The larger of the forward's and the backward's, on `threads` threads.
inline int64_t cpu_attention_scratch_bytes(const AttentionShape& s, int64_t threads) {
  return std::max(attention_scratch_bytes(s, threads, false), attention_scratch_bytes(s, threads, true));
}

}  // namespace mt
