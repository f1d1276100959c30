// One candidate run: model, training mode, batch, mesh and cluster; and the per-rank parameter
// counts of each pipeline stage, from the trainer's own layouts (parallel/shard_plan.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "parallel/mesh.h"
#include "parallel/pipeline.h"
#include "plan/hardware.h"
#include "plan/model_shape.h"
#include "train/run_config.h"

namespace mt::plan {

// How the frozen base is stored under LoRA: the compute precision's copy (bf16, or f32 in an
// fp32 run), or QLoRA's 4-bit NormalFloat (config: lora.base_dtype = "nf4"). NF4 covers the
// transformer layers' projection matrices; the embedding, the head and the norms keep the
// compute copy, as QLoRA (bitsandbytes) leaves everything but the linear layers.
enum class BaseDtype { bf16, nf4 };
BaseDtype parse_base_dtype(const std::string& name);  // "bf16" or "nf4"; throws otherwise
const char* base_dtype_name(BaseDtype d);

// NF4 storage per weight: a 4-bit code, an 8-bit absmax per block of 64 weights, and an f32 scale
// and offset per 256 such absmaxes (double quantisation): 4 + 8/64 + 64/(64·256) = 4.1289 bits.
inline constexpr double kNf4BytesPerWeight = (4.0 + 8.0 / 64.0 + 64.0 / (64.0 * 256.0)) / 8.0;

struct PlanInput {
  ModelShape model;
  LoraConfig lora;  // lora.enabled: LoRA mode (frozen base), otherwise full training
  BaseDtype base_dtype = BaseDtype::bf16;  // nf4: LoRA mode only
  Precision precision = Precision::bf16;
  int64_t seq = 2048;
  int64_t global_batch = 8;  // sequences per optimizer step
  int64_t micro_batch = 1;   // sequences per micro-batch per data-parallel rank
  bool checkpointing = false;
  // train.sequence_parallel: with tp, the residual stream between the tensor-parallel regions
  // split over the tp ranks (where a micro-batch's tokens divide over them, as the trainer needs).
  bool sequence_parallel = true;
  int zero = 0;  // 0-3: what is also sharded over the dp axis (1 optimizer, 2 + grads, 3 + weights)
  parallel::MeshShape mesh;
  Cluster cluster;
  bool overlap = true;  // fsdp gathers and dp reductions overlap compute (false: eager, serial)
  // train.dp_bucket_mb in bytes: the dp reduction runs in buckets during the backward, all but the
  // last (the first units' gradients, final when the backward ends) hidden; 0: one reduction
  // after the backward, nothing hidden.
  double dp_bucket_bytes = 25e6;
  // Under pp: blocks per stage as train.pp_blocks ("2,3"; empty: parallel::pipeline_blocks's
  // balanced split, the trainer's) and the schedule (GPipe keeps all m micro-batches in flight).
  std::string pp_blocks;
  parallel::PipelineSchedule pp_schedule = parallel::PipelineSchedule::one_f_one_b;
  // Chunks per stage (train.pp_virtual; interleaved 1F1B when > 1): pp_blocks then gives blocks per
  // chunk, pp x pp_virtual of them.
  int64_t pp_virtual = 1;
  // A mixture of experts under ep: the rows the busiest ep rank's experts compute over the mean
  // (N k a rank, the routing balanced). The all-to-all waits for that rank, so its expert GEMMs
  // set the layer's pace; 1: perfectly balanced. Not applied without ep (a rank then computes
  // every expert over its own N k rows, however they are routed).
  double moe_imbalance = 1.0;
  // Preference training (train/preference_step.h): forwards each micro-batch runs before its
  // training pass: 1 (the policy's log-probabilities), 2 with the adapters-off reference; 0: SFT.
  int64_t extra_forwards = 0;

  // The ranks that split a step's rows: dp x fsdp x ep (the ep ranks are data parallel for all but
  // the experts; cp ranks share each row's tokens instead).
  int64_t data_parallel() const { return mesh.batch_ranks(); }
  int64_t micro_batches() const { return global_batch / (micro_batch * data_parallel()); }
  // Tokens of a micro-batch one rank holds: under cp its seq / cp of every row (chunks r and
  // 2 cp - 1 - r, parallel/context_parallel.h).
  int64_t micro_tokens() const { return micro_batch * (seq / mesh.cp); }
  // The ranks a micro-batch's residual stream is split over: tp under sequence parallelism, else 1.
  int64_t sequence_shards() const {
    return sequence_parallel && micro_tokens() % mesh.tp == 0 ? mesh.tp : 1;
  }
  // moe_imbalance as the run can have it: under ep a capacity factor (the model config's
  // moe_capacity_factor) caps the rows an ep rank's experts receive (model/moe.h moe_expert_rows),
  // and so the busiest rank's share over the mean N k.
  double expert_load() const;
};

// Throws one line for a non-positive size, a ZeRO level outside 0-3, a batch the data-parallel
// ranks and micro-batch do not divide, a sequence 2 x cp does not divide, heads tp does not
// divide, a model pp cannot split (or a pp_blocks that does not fit it), a sequence past the
// model's positions, an NF4 base outside LoRA mode, a mixture of experts under tp, ep on a dense
// model or not dividing the experts (the trainer's check_moe_layout), an imbalance factor below 1.
void validate(const PlanInput& in);

// Elements one rank holds of a set of tensors: its own block (local) and, for the tensors fsdp
// splits, the block after an fsdp all-gather (gathered: what a gather buffer must hold).
// The nf4 counts are the frozen elements stored in NF4 (of local and gathered, not besides them).
// local_expert_trainable: of local_trainable, the experts' (under ep their gradients are summed over
// dp only, the rest over dp x ep). Under ep only the rank's own experts are counted.
struct ElemCount {
  int64_t local = 0, local_trainable = 0, gathered = 0, gathered_trainable = 0;
  int64_t local_nf4 = 0, gathered_nf4 = 0;
  int64_t local_expert_trainable = 0;
  ElemCount& operator+=(const ElemCount& o);
  ElemCount times(int64_t k) const;
};

struct StageParams {
  int64_t index = 0, layers = 0;
  int64_t chunk_layers = 0;  // blocks of its largest chunk (= layers without train.pp_virtual): run at once
  bool first = false, last = false;
  ElemCount params;     // everything the stage's rank holds
  ElemCount max_unit;   // the largest unit gathered at once (a layer, the embedding, the head)
  ElemCount layer_unit;  // one block's unit: what is gathered beside the embedding or the head
};

// Blocks per chunk as the trainer splits them: parallel::pipeline_blocks of the model, pp x
// pp_virtual and pp_blocks ({layers} when pp = 1).
std::vector<int64_t> stage_blocks(const PlanInput& in);
// One entry per pipeline stage, holding what parallel::stage_holds gives it over stage_blocks (a
// tied embedding's copy on the last stage included). Every rank of a stage holds the same counts
// (no padding).
std::vector<StageParams> stage_params(const PlanInput& in);
// Per-rank count of a tensor list under the input's rules and mesh (via parallel::shard_params).
ElemCount count_elems(const std::vector<ParamShape>& params, const PlanInput& in);

}  // namespace mt::plan
