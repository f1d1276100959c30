// The memory a training run needs on each rank, from the planner's memory model (the figures
// `meshtrain plan` prints for the same run), and the check `meshtrain train` makes with it before
// anything is allocated: a run that cannot fit is refused with the figure instead of growing until
// the kernel kills it.
#pragma once
#include <cstdint>
#include <string>

#include "core/available_memory.h"
#include "plan/memory_model.h"
#include "train/run_config.h"

namespace mt::plan {

// The share of the available memory a run may plan to fill. The rest is headroom for what the
// memory model does not count: the data and tokenizer, the allocator's slack, the libraries.
inline constexpr double kUsableMemoryFraction = 0.9;

// The run as the planner sees it: `shape` (cfg.model, or the config of model.path), cfg's LoRA,
// precision, checkpointing and mesh, micro-batches of train.batch_size rows split over dp x fsdp x ep
// (train.grad_accum of them per step) of train.seq_len tokens, the default partition rules, on
// this machine (the `cpu` cluster) with `memory_per_rank` bytes for each rank. Under mesh cp > 1
// the planner prices a rank's seq_len / cp tokens and its K/V exchange (cp_exchange_bytes).
// Preference training's forwards before each training pass (PlanInput::extra_forwards) for
// train.method, lora.enabled and preference.reference: 0 for sft.
int64_t preference_forwards(const std::string& method, bool lora, const std::string& reference);
PlanInput run_plan_input(const RunConfig& cfg, const ModelConfig& shape, double memory_per_rank);

// A byte count as the memory lines print it ("1.50 GiB"), capped where a double would overflow.
std::string bytes_text(double bytes);

// mt::Error, one line with the figures and what to lower, when the largest rank's peak (plan's
// peak_memory) exceeds kUsableMemoryFraction of `available` shared among `ranks_on_host` ranks.
// Nothing is checked when the available memory is unknown (bytes < 0).
void check_run_memory(const RunConfig& cfg, const ModelConfig& shape, const AvailableMemory& available,
                      int64_t ranks_on_host);

}  // namespace mt::plan
