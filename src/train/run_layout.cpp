#include "train/run_layout.h"

#include <string>

#include "core/error.h"
#include "model/param_shapes.h"
#include "parallel/pipeline.h"
#include "parallel/shard_plan.h"
#include "parallel/sharded_model.h"
#include "parallel/tensor_parallel.h"
#include "parallel/vocab_padding.h"

namespace mt {

void check_batch_split(int64_t batch_size, int64_t data_parallel) {
  if (batch_size % data_parallel != 0)
    fail("train.batch_size (" + std::to_string(batch_size) + ") must be divisible by dp x fsdp x ep (" +
         std::to_string(data_parallel) + ")");
}

void check_context_split(const RunConfig& cfg, int64_t cp) {
  if (cp == 1) return;
  const int64_t seq_len = cfg.train.seq_len;
  if (seq_len % (2 * cp) != 0)
    fail("train.seq_len (" + std::to_string(seq_len) + ") must be divisible by 2 x cp (" + std::to_string(2 * cp) +
         "): context parallelism cuts every sequence into 2 cp equal chunks");
}

std::vector<int64_t> run_stage_blocks(const TrainConfig& tc, const ModelConfig& shape,
                                      const parallel::MeshShape& mesh) {
  const parallel::PipelineSchedule schedule = parallel::parse_pipeline_schedule(tc.pp_schedule);
  const int chunks = int(tc.pp_virtual);
  parallel::check_virtual_stages(schedule, int(mesh.pp), chunks, tc.grad_accum);
  parallel::check_pipeline_keys(schedule, int(mesh.pp), tc.pp_blocks);
  if (mesh.pp == 1) return {};
  return parallel::pipeline_blocks(shape, mesh.pp * chunks, tc.pp_blocks, chunks);
}

void check_sequence_split(const RunConfig& cfg, const parallel::MeshShape& mesh) {
  const auto& tc = cfg.train;
  if (!tc.sequence_parallel || mesh.tp == 1 || tc.seq_len == 0) return;  // 0: checked when chosen
  const int64_t rows = tc.batch_size / mesh.batch_ranks() * (tc.seq_len / mesh.cp);
  if (rows % mesh.tp != 0)
    fail("a rank's " + std::to_string(rows) +
         " tokens per micro-batch (train.batch_size / (dp x fsdp x ep) x train.seq_len / cp) must be "
         "divisible by tp (" + std::to_string(mesh.tp) + ") for sequence parallelism; or set "
         "train.sequence_parallel = false");
}

void check_moe_capacity(const TrainConfig& tc, const ModelConfig& shape) {
  if (tc.moe_capacity_factor > 0.0f && !shape.moe())
    fail("train.moe_capacity_factor caps a mixture of experts' experts; the " + shape.model_type +
         " model is dense (set it to 0)");
}

void check_moe_layout(const ModelConfig& shape, const parallel::MeshShape& mesh) {
  parallel::expert_parallel_config(shape, mesh.ep, 0);  // ep needs experts, and must divide them
}

void check_model_layout(const RunConfig& cfg, const ModelConfig& shape, const parallel::MeshShape& mesh) {
  check_moe_layout(shape, mesh);
  check_context_split(cfg, mesh.cp);
  run_stage_blocks(cfg.train, shape, mesh);
  // A mesh without fsdp, tp, pp, cp or ep keeps whole replicas: the sharded model, whose checks
  // follow, is not built (train/placed_model.cpp).
  if (mesh.fsdp == 1 && mesh.tp == 1 && mesh.pp == 1 && mesh.cp == 1 && mesh.ep == 1) return;
  parallel::tensor_parallel_config(shape, mesh.tp);
  // The layout the sharded model places: a vocabulary tp does not divide padded.
  const auto sharded =
      parallel::shard_params(parallel::laid_out_shapes(llama_param_shapes(shape, cfg.lora), mesh.tp),
                             cfg.lora.enabled, cfg.partition.effective(), mesh, cfg.lora.quantized_base());
  for (const parallel::ShardedParam& sp : sharded)
    for (int64_t rank = 0; rank < mesh.world(); ++rank) parallel::check_rank_block(sp, mesh, rank);
}

void check_run_layout(const RunConfig& cfg, const ModelConfig& shape, const parallel::MeshShape& mesh) {
  check_model_layout(cfg, shape, mesh);
  check_moe_capacity(cfg.train, shape);
  check_batch_split(cfg.train.batch_size, mesh.batch_ranks());
  check_sequence_split(cfg, mesh);
}

}  // namespace mt
