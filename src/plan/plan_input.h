// One candidate run: model, training mode, batch, mesh and cluster; and the per-rank parameter
// counts of each pipeline stage, from the trainer's own layouts (parallel/shard_plan.h).
#pragma once
#include <cstdint>
#include <vector>

#include "parallel/mesh.h"
#include "plan/hardware.h"
#include "plan/model_shape.h"
#include "train/run_config.h"

namespace mt::plan {

struct PlanInput {
  ModelShape model;
  LoraConfig lora;  // lora.enabled: LoRA mode (frozen base), otherwise full training
  Precision precision = Precision::bf16;
  int64_t seq = 2048;
  int64_t global_batch = 8;  // sequences per optimizer step
  int64_t micro_batch = 1;   // sequences per micro-batch per data-parallel rank
  bool checkpointing = false;
  int zero = 0;  // 0-3: what is also sharded over the dp axis (1 optimizer, 2 + grads, 3 + weights)
  parallel::MeshShape mesh;
  Cluster cluster;
  bool overlap = true;  // fsdp gathers and dp reductions overlap compute (false: eager, serial)

  int64_t data_parallel() const { return mesh.dp * mesh.fsdp; }
  int64_t micro_batches() const { return global_batch / (micro_batch * data_parallel()); }
  int64_t layers_per_stage() const { return model.layers() / mesh.pp; }
  int64_t micro_tokens() const { return micro_batch * seq; }
};

// Throws one line for a non-positive size, a ZeRO level outside 0-3, a batch the data-parallel
// ranks and micro-batch do not divide, layers or heads the mesh does not divide, a sequence past
// the model's positions.
void validate(const PlanInput& in);

// Elements one rank holds of a set of tensors: its own block (local) and, for the tensors fsdp
// splits, the block after an fsdp all-gather (gathered: what a gather buffer must hold).
struct ElemCount {
  int64_t local = 0, local_trainable = 0, gathered = 0, gathered_trainable = 0;
  ElemCount& operator+=(const ElemCount& o);
  ElemCount times(int64_t k) const;
};

struct StageParams {
  int64_t index = 0, layers = 0;
  bool first = false, last = false;
  ElemCount params;     // everything the stage's rank holds
  ElemCount max_unit;   // the largest unit gathered at once (a layer, the embedding, the head)
};

// One entry per pipeline stage. Every rank of a stage holds the same counts (no padding).
std::vector<StageParams> stage_params(const PlanInput& in);
// Per-rank count of a tensor list under the input's rules and mesh (via parallel::shard_params).
ElemCount count_elems(const std::vector<ParamShape>& params, const PlanInput& in);

}  // namespace mt::plan
