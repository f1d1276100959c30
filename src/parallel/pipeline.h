// Pipeline parallelism: the model's units (0 = embedding, 1..L = blocks, L + 1 = final norm and
// head; see model/model_parallel.h) cut into contiguous stages, one per rank of the pp group, and
// a schedule of micro-batches through them. The model is not changed: a stage runs its units with
// LlamaModel::run_units and sends the residual stream where the model is cut (forward) and its
// gradient (backward) to the neighbouring stage.
//
// A stage keeps only its input per micro-batch in flight between its forward and backward, and
// recomputes its units' forward in the backward (GPipe's re-materialisation), so a stage's
// activation memory is one micro-batch's plus its inputs: under 1F1B at most pp - stage of them,
// under GPipe all m. The last stage runs its forward and backward at once (the loss is there).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/llama.h"
#include "parallel/comm.h"

namespace mt::parallel {

enum class PipelineSchedule { gpipe, one_f_one_b };
// "gpipe" or "1f1b".
PipelineSchedule parse_pipeline_schedule(const std::string& name);

// Blocks per stage. `asked` ("2,3", from train.pp_blocks) is checked: one positive count per
// stage, summing to the model's blocks; empty: the split of at least one block per stage that
// minimises the largest stage's cost, a block costing its parameters and the last stage the head's
// too (a GEMM's FLOPs per token are twice its parameters; the embedding's lookup is free). A model
// that cannot be split is refused with one line naming why.
std::vector<int64_t> pipeline_blocks(const LlamaConfig& config, int64_t stages,
                                     const std::string& asked);

// The units [first, last] of `stage` under `blocks`.
UnitSpan stage_units(const std::vector<int64_t>& blocks, int stage);

// Per unit (0 = embedding, 1..L = blocks, L + 1 = final norm and head), whether `stage` stores its
// parameters: its own units, and on the last stage a tied embedding too (the head reads it there;
// Megatron's copy, its gradient summed with the first stage's, written to checkpoints by the first
// stage only). Shape-only: the trainer, `meshtrain shard` and the planner place stages alike.
std::vector<bool> stage_holds(const LlamaConfig& config, const std::vector<int64_t>& blocks, int stage);
// The stage whose units include `unit` (the one writing it: a tied embedding's is the first).
int stage_of_unit(const std::vector<int64_t>& blocks, int unit);
// "2,3": blocks per stage as train.pp_blocks spells them.
std::string blocks_text(const std::vector<int64_t>& blocks);
// What `stage` stores, in words: "embedding, blocks 0-3", "block 4, final norm and head", with
// ", embedding copy (tied head)" where stage_holds gives the last stage a tied embedding.
std::string describe_units(const LlamaConfig& config, const std::vector<int64_t>& blocks, int stage);

// One stage's order of work for one step: the forward or the backward of micro-batch `micro`.
struct PipeOp {
  bool forward = true;
  int64_t micro = 0;
  bool operator==(const PipeOp&) const = default;
};
// GPipe: every forward, then every backward. 1F1B (PipeDream-Flush): pp - 1 - stage forwards of
// warm-up, then one forward and one backward alternately, then the remaining backwards. Backwards
// go in micro-batch order under both, so gradients accumulate in the order of one rank's.
std::vector<PipeOp> pipeline_order(PipelineSchedule schedule, int stages, int stage, int64_t micro);

class Pipeline {
 public:
  // `group` is the pp group: its rank r is stage r. Both must outlive this.
  Pipeline(Comm& group, LlamaModel& model, std::vector<int64_t> blocks, PipelineSchedule schedule);

  int stage() const { return group_.rank(); }
  const std::vector<int64_t>& blocks() const { return blocks_; }
  // The units this stage holds, "units 0-2 (embedding, blocks 0-1)" for logs.
  std::string describe_stage() const;

  // Forward and backward of every micro-batch in the schedule's order, gradients accumulated into
  // this stage's units (the other units' stay zero). Returns the loss sum: the last stage's, 0 on
  // the others. Every stage gets the same micro-batches (tokens, positions and segments are read
  // by every block; targets only by the last stage).
  double forward_backward(const std::vector<ModelInput>& micro, float grad_scale);
  // Forward only; the loss, summed over the stages, so every stage returns it.
  LossSum forward_loss(const ModelInput& in);

 private:
  Comm& group_;
  LlamaModel& model_;
  std::vector<int64_t> blocks_;
  PipelineSchedule schedule_;
  UnitSpan units_;
};

}  // namespace mt::parallel
