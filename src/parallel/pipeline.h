// Pipeline parallelism: the model's units (0 = embedding, 1..L = blocks, L + 1 = final norm and
// head; see model/model_parallel.h) cut into contiguous chunks, and a schedule of micro-batches
// through them. With v = train.pp_virtual chunks per rank there are pp * v chunks, and rank s holds
// chunks s, s + pp, s + 2 pp, ... (v = 1: one contiguous stage per rank). The model is not changed:
// a rank runs a chunk's units with Transformer::run_units and sends the residual stream where the
// model is cut (forward) and its gradient (backward) to the rank holding the neighbouring chunk.
//
// A rank keeps only each chunk's input per micro-batch in flight between its forward and backward,
// and recomputes the chunk's forward in the backward (GPipe's re-materialisation), so its
// activation memory is one micro-batch's through its largest chunk (the model's arena, planned for
// the rank's units alone: Transformer::set_units, which the constructor calls) plus its kept
// inputs: under 1F1B at most pp - stage of them, under GPipe all m, interleaved the schedule's
// warm-up + 1 (pipeline_order). The last chunk runs its forward and backward at once (the loss is there). The
// inputs, outputs and gradients are backend buffers (tensor memory), and a sent one is released as
// soon as the orders prove its receiver has it (pipeline_buffers).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/transformer.h"
#include "parallel/comm.h"

namespace mt::parallel {

enum class PipelineSchedule { gpipe, one_f_one_b };
// "gpipe" or "1f1b".
PipelineSchedule parse_pipeline_schedule(const std::string& name);

// Blocks per stage (per chunk under virtual stages: `stages` = pp x v, `chunks` = v, which only
// the messages use). `asked` ("2,3", from train.pp_blocks) is checked: one positive count per stage, summing to the model's blocks;
// empty: the split of at least one block per stage that minimises the largest stage's cost, a
// block costing its parameters and the last stage the head's too (a GEMM's FLOPs per token are
// twice its parameters; the embedding's lookup is free). A model that cannot be split is refused
// with one line naming why.
std::vector<int64_t> pipeline_blocks(const ModelConfig& config, int64_t stages,
                                     const std::string& asked, int64_t chunks = 1);

// The units [first, last] of chunk `stage` under `blocks` (blocks per chunk, first to last).
UnitSpan stage_units(const std::vector<int64_t>& blocks, int stage);

// The chunks rank `stage` of `stages` holds, in order, under `blocks` (blocks per chunk: stages x v
// of them): chunks stage, stage + stages, stage + 2 stages, ...
std::vector<UnitSpan> rank_chunks(const std::vector<int64_t>& blocks, int stages, int stage);

// Per unit (0 = embedding, 1..L = blocks, L + 1 = final norm and head), whether `stage` stores its
// parameters: the units of its chunks (rank_chunks; `blocks` per chunk, `chunks` of them per stage,
// train.pp_virtual), and on the last stage a tied embedding too (the head reads it there;
// Megatron's copy, its gradient summed with the first stage's, written to checkpoints by the first
// stage only). Shape-only: the trainer, `meshtrain shard` and the planner place stages alike.
std::vector<bool> stage_holds(const ModelConfig& config, const std::vector<int64_t>& blocks, int stage,
                              int chunks = 1);
// The stage whose units include `unit` (the one writing it: a tied embedding's is the first).
int stage_of_unit(const std::vector<int64_t>& blocks, int unit, int chunks = 1);
// "2,3": blocks per stage as train.pp_blocks spells them.
std::string blocks_text(const std::vector<int64_t>& blocks);
// What chunk `stage` of `blocks` (a stage's, without virtual stages) stores, in words: "embedding,
// blocks 0-3", "block 4, final norm and head", with ", embedding copy (tied head)" where
// stage_holds gives the last one a tied embedding.
std::string describe_units(const ModelConfig& config, const std::vector<int64_t>& blocks, int stage);
// What rank `stage` of `stages` stores over its chunks (rank_chunks), each described by
// describe_units and joined by "; ": "embedding, blocks 0-1; blocks 4-5".
std::string describe_stage_units(const ModelConfig& config, const std::vector<int64_t>& blocks, int stage,
                                 int stages);

// Refuses, in one line, virtual stages (train.pp_virtual = `chunks`) the schedule cannot run: more
// than one needs pp > 1, the 1F1B schedule, and micro-batches (train.grad_accum) a multiple of pp.
void check_virtual_stages(PipelineSchedule schedule, int stages, int chunks, int64_t micro);

// Refuses, in one line, the pipeline's keys given for a run without a pipeline (mesh pp = `stages`
// < 2): train.pp_blocks (`blocks`, non-empty) and a train.pp_schedule other than the default 1F1B
// would otherwise be ignored without a word.
void check_pipeline_keys(PipelineSchedule schedule, int stages, const std::string& blocks);

// One rank's order of work for one step: the forward or the backward of micro-batch `micro`
// through its chunk `chunk` (an index into rank_chunks: 0 for a plain stage).
struct PipeOp {
  bool forward = true;
  int64_t micro = 0;
  int chunk = 0;
  bool operator==(const PipeOp&) const = default;
};
// GPipe: every forward, then every backward. 1F1B (PipeDream-Flush): pp - 1 - stage forwards of
// warm-up, then one forward and one backward alternately, then the remaining backwards.
// Interleaved 1F1B (chunks > 1; Megatron-LM's, Narayanan et al. 2021): micro-batches go through
// the chunks in groups of pp (forwards: pp micro-batches through chunk 0, the same through chunk
// 1, ..., then the next pp; backwards the same from the last chunk), with 2 (pp - 1 - stage) +
// (v - 1) pp forwards of warm-up. Each chunk's backwards go in micro-batch order under all of
// them, so gradients accumulate in the order of one rank's.
std::vector<PipeOp> pipeline_order(PipelineSchedule schedule, int stages, int stage, int64_t micro,
                                   int chunks = 1);

// When a stage's sent buffers may go, and what it holds at most, counted from the orders of the
// stage and its neighbours. A rank's receive returns only after its neighbour posted the send, and
// each op of an order receives before it sends, so a message the neighbour sent from its op at
// position P proves that every op of its order up to P has received what it waited for: the sends
// of ours those ops received are complete and their buffers can go, with no wait that blocks. Sent
// outputs and gradients are released so (at the receive of op i, those listed in
// release_at_receive[i], by op index); a chunk's input is kept from its forward to its backward.
// Without virtual stages an output sent forward is also waited for at the start of the stage's
// next forward (release_before_forward[i]) and freed when that send completes, as Megatron frees
// an output once sent: the wait is on the next stage's receive, which needs nothing from this
// stage beyond outputs it has already sent (waits point only down the pipeline, and the last stage
// sends no outputs), so it cannot deadlock, and it keeps the warm-up's outputs from piling up
// (1F1B's stage s held pp - 1 - s of them until the first gradient came back). Interleaved
// schedules send around a ring (the last stage to the first), where such waits could form a
// cycle: they keep only the proofs.
struct PipelineBuffers {
  std::vector<std::vector<size_t>> release_at_receive;     // per op of pipeline_order
  std::vector<std::vector<size_t>> release_before_forward;  // per op: outputs waited for first
  // The most while a chunk computes: micro-batches between their forward and their backward (the
  // last chunk's for the op itself; 1F1B min(pp - stage, m), GPipe m), and activation-sized
  // buffers alive (kept inputs, outputs and gradients not yet known received, the received
  // gradient).
  int64_t peak_in_flight = 0, peak_buffers = 0;
  // The most allocated at any moment: a receive's buffer (a new input, or the gradient buffer the
  // first time) exists before the sends its arrival proves received are released, so this is
  // peak_buffers or one more (GPipe's stage 0: m outputs and the first gradient). What the memory
  // planner counts.
  int64_t peak_allocated = 0;
};
PipelineBuffers pipeline_buffers(PipelineSchedule schedule, int stages, int stage, int64_t micro,
                                 int chunks = 1);

// Where one rank's time went in a step's forward_backward: clock reads around each op.
struct PipelineTiming {
  double compute_s = 0.0;    // running its chunks' units (forward and backward)
  double recv_wait_s = 0.0;  // blocked in receives: waiting for a neighbour's activation or gradient
  double send_wait_s = 0.0;  // posting sends and blocked until they completed
  int64_t sent_bytes = 0;
  // The most while a chunk computed (the steps' maximum in a sum): micro-batches in flight and
  // bytes of the pipeline's buffers (backend memory, counted in the peak of tensor memory).
  int64_t peak_in_flight = 0, peak_buffer_bytes = 0;
  PipelineTiming& operator+=(const PipelineTiming& o);
};

class Pipeline {
 public:
  // `group` is the pp group: its rank r is stage r. Both must outlive this. `blocks`: blocks per
  // chunk, group.size() x `chunks` of them (check_virtual_stages has accepted `chunks`). Tells
  // `model` the units of this stage's chunks (Transformer::set_units): it runs no others.
  Pipeline(Comm& group, Transformer& model, std::vector<int64_t> blocks, PipelineSchedule schedule,
           int chunks = 1);

  int stage() const { return group_.rank(); }
  const std::vector<int64_t>& blocks() const { return blocks_; }  // per chunk
  int chunks() const { return int(chunks_.size()); }                // per stage (train.pp_virtual)
  // The units this stage holds, "stage 0 of 2 (blocks 2,2): embedding, blocks 0-1" for logs.
  std::string describe_stage() const;

  // Forward and backward of every micro-batch in the schedule's order, gradients accumulated into
  // this stage's units (the other units' stay zero). Returns the loss sum (`sum`: the last stage's,
  // 0 on the others) and a mixture of experts' routing losses summed over the micro-batches
  // (`routing`: on every stage), and the choices a capacity factor dropped in this stage's layers
  // (`dropped`, each micro-batch's forward once). Every stage gets the same micro-batches (tokens, positions and
  // segments are read by every block; targets only by the last stage). With routing losses, whose
  // statistics span every MoE layer, each cut also carries them: forward, those of the layers
  // before it; backward, the batch's totals from the last stage.
  LossSum forward_backward(const std::vector<ModelInput>& micro, float grad_scale);
  // Forward only; the loss, summed over the stages, so every stage returns it.
  LossSum forward_loss(const ModelInput& in);

  // The last forward_backward's timing, and the sum over those since reset_total_timing.
  const PipelineTiming& step_timing() const { return step_timing_; }
  const PipelineTiming& total_timing() const { return total_timing_; }
  void reset_total_timing() { total_timing_ = {}; }

 private:
  Comm& group_;
  Transformer& model_;
  std::vector<int64_t> blocks_;
  PipelineSchedule schedule_;
  std::vector<UnitSpan> chunks_;  // rank_chunks of this stage
  PipelineTiming step_timing_, total_timing_;
};

}  // namespace mt::parallel
