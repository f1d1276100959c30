// Memory per device, item by item, for the busiest pipeline stage. Parameter state comes from the
// trainer's layouts (exact); activations from the engine's own arena sizes, for every family.
// Formulas: docs/planner.md, "Memory".
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "plan/plan_input.h"

namespace mt::plan {

// Gradient buckets a data-parallel all-reduce stages at once (parallel/gradient_buckets.h).
inline constexpr double kBucketsInFlight = 3.0;

struct MemoryItem {
  std::string name;
  double bytes = 0.0;
};

struct MemoryBreakdown {
  int64_t stage = 0;                // the pipeline stage these figures are for
  std::vector<MemoryItem> items;    // weights, grads, master, optimizer, lora ..., overhead
  double total = 0.0;
  double capacity = 0.0;
  bool fits() const { return total <= capacity; }
  double item(const std::string& name) const;  // 0 when absent
};

// Bytes of saved activations of one micro-batch on a stage of `layers` layers, and the scratch
// and logits buffers that exist once. checkpointing: only layer inputs plus one layer's set.
// `last_stage`: the stage holds the head (LLaMA: its rows in the arena, and the logits chunk);
// `first_stage`: the embedding (under sequence parallelism: its rows whole, f32).
struct ActivationBytes {
  double per_micro_batch = 0.0;  // kept from forward to backward, per micro-batch in flight
  double shared = 0.0;           // one layer's full set under checkpointing (recompute target) + scratch
  double logits = 0.0;           // head and loss buffers (last stage only)
  double layer = 0.0;            // one layer's full saved set for one micro-batch (elementwise traffic)
};
ActivationBytes activation_bytes(const PlanInput& in, int64_t layers, bool first_stage, bool last_stage);

// Context parallelism's exchange buffers on a rank (parallel/context_parallel.cpp), 0 without cp:
// the whole rows' keys and values, their gradients and the gather staging in the compute dtype,
// the f32 reduce-scatter staging, for one layer at a time. Both `meshtrain plan` and train's
// memory check count them through memory_per_device ("cp K/V exchange").
double cp_exchange_bytes(const PlanInput& in);

MemoryBreakdown memory_per_device(const PlanInput& in, const StageParams& stage);
// The whole base model's weights as stored, on no mesh: the compute copy (bf16, or f32 in an
// fp32 run), with an NF4 base its layers' matrices at kNf4BytesPerWeight instead.
double base_weight_bytes(const PlanInput& in);
// The stage with the largest total (stages: stage_params(in), passed in to reuse across a search).
MemoryBreakdown peak_memory(const PlanInput& in, const std::vector<StageParams>& stages);
MemoryBreakdown peak_memory(const PlanInput& in);

}  // namespace mt::plan
