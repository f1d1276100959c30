// Whether the trainer can lay a run out on a mesh, asked before any rank starts: the same checks
// the trainer makes as it builds the mesh's groups, the sharded model and the pipeline, on shapes
// alone (no ranks, no weights). `train --mesh auto` keeps only the planner's layouts that pass
// (plan/auto_mesh.h), so it never picks one the trainer would then refuse; `train` asks
// check_run_layout before its memory check, and `shard` check_model_layout, so shard lays out no
// model train refuses; the trainer calls the pieces below itself, so none can drift apart.
#pragma once
#include <cstdint>
#include <vector>

#include "model/config.h"
#include "parallel/mesh.h"
#include "train/run_config.h"

namespace mt {

// The data-parallel group (dp x fsdp x ep) shares out each micro-batch's rows: refused in one line when
// `data_parallel` ranks cannot split train.batch_size = `batch_size` evenly.
void check_batch_split(int64_t batch_size, int64_t data_parallel);
// Context parallelism cuts every sequence into 2 cp equal chunks: refused in one line when 2 x cp
// does not divide train.seq_len.
void check_context_split(const RunConfig& cfg, int64_t cp);
// Sequence parallelism (train.sequence_parallel, tp > 1) splits a rank's tokens of a micro-batch
// over the tp ranks: refused in one line when tp does not divide them.
void check_sequence_split(const RunConfig& cfg, const parallel::MeshShape& mesh);
// Expert parallelism (parallel/expert_parallel.h): refused in one line when ep does not divide the
// model's experts, or the model is dense and ep > 1.
void check_moe_layout(const ModelConfig& shape, const parallel::MeshShape& mesh);
// train.moe_capacity_factor > 0 on a dense model: refused in one line.
void check_moe_capacity(const TrainConfig& tc, const ModelConfig& shape);

// Blocks per pipeline chunk under `mesh` (empty without pp): the schedule's keys checked against the
// mesh and train.grad_accum, then parallel::pipeline_blocks of the model over pp x train.pp_virtual
// chunks. Refused in one line when the model cannot be split so.
std::vector<int64_t> run_stage_blocks(const TrainConfig& tc, const ModelConfig& shape,
                                      const parallel::MeshShape& mesh);

// The model's layout on the mesh, whatever the batch: expert parallelism, the sequence over cp, the
// pipeline's split (run_stage_blocks), tensor parallelism's split of the model
// (parallel::tensor_parallel_config: heads, KV heads, the MLP and the vocabulary over tp), the
// partition rules' layout of each tensor (parallel::shard_params: dimensions that do not divide) and
// each rank's block of it (parallel::check_rank_block: fsdp tiling, QLoRA's NF4 blocks). mt::Error,
// one line, for the first that fails. `meshtrain shard` makes this check, so it lays out nothing
// train refuses. `shape` is the run's model (cfg.model or model.path's config).
void check_model_layout(const RunConfig& cfg, const ModelConfig& shape, const parallel::MeshShape& mesh);
// check_model_layout, then the run's batch: train.moe_capacity_factor, the micro-batch's split over
// dp x fsdp x ep and sequence parallelism's over tp (check_batch_split, check_sequence_split).
void check_run_layout(const RunConfig& cfg, const ModelConfig& shape, const parallel::MeshShape& mesh);

}  // namespace mt
