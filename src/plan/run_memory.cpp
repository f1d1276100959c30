#include "plan/run_memory.h"

#include <algorithm>
#include <string>

#include "core/checked_math.h"
#include "core/error.h"
#include "plan/hardware.h"
#include "train/metrics.h"

namespace mt::plan {

std::string bytes_text(double bytes) { return format_bytes(int64_t(std::min(bytes, 9e18))); }

namespace {

// What to change, for the item that takes the most memory.
std::string advice(const RunConfig& cfg, const std::string& largest) {
  if (largest == "activations" || largest == "logits+loss" || largest == "comm buffers" ||
      largest == "cp K/V exchange")
    return std::string("lower train.batch_size or train.seq_len") +
           (cfg.train.activation_checkpointing ? "" : ", or set train.activation_checkpointing = true");
  if (largest == "rope tables") return "lower model.max_position_embeddings";
  return std::string("the model's state does not fit: ") +
         (cfg.lora.enabled ? "" : "train LoRA adapters (lora.enabled = true), ") +
         "shard it over more ranks (mesh.fsdp, mesh.cp, mesh.tp; a mixture of experts' experts over mesh.ep) "
         "or use a smaller model";
}

}  // namespace

int64_t preference_forwards(const std::string& method, bool lora, const std::string& reference) {
  if (method == "sft") return 0;
  const bool adapters_off = (method == "dpo" || method == "ipo") &&
                            (reference == "adapters_off" || (reference == "auto" && lora));
  return adapters_off ? 2 : 1;
}

PlanInput run_plan_input(const RunConfig& cfg, const ModelConfig& shape, double memory_per_rank) {
  const TrainConfig& tc = cfg.train;
  PlanInput in;
  in.model = {cfg.model_path.empty() ? "model" : cfg.model_path, shape};
  // A run key the trainer sets on the model (Transformer::set_moe_capacity_factor): it bounds the
  // rows an ep rank's experts receive, and so their activations.
  if (shape.moe()) in.model.config.moe_capacity_factor = tc.moe_capacity_factor;
  in.lora = cfg.lora;
  if (cfg.lora.enabled) in.base_dtype = parse_base_dtype(cfg.lora.base_dtype);
  in.precision = tc.precision;
  in.seq = tc.seq_len;
  in.checkpointing = tc.activation_checkpointing;
  in.sequence_parallel = tc.sequence_parallel;
  in.mesh = cfg.mesh;
  in.pp_blocks = tc.pp_blocks;
  in.pp_schedule = parallel::parse_pipeline_schedule(tc.pp_schedule);
  in.pp_virtual = tc.pp_virtual;
  // Each micro-batch's rows are shared out over dp x fsdp x ep; a batch that does not divide is the
  // trainer's to refuse, so round up here and let it.
  const int64_t ranks = in.data_parallel();
  in.micro_batch = (tc.batch_size + ranks - 1) / ranks;
  in.global_batch = mul_or_fail(mul_or_fail(in.micro_batch, ranks, "train.batch_size over the data-parallel ranks"),
                                tc.grad_accum, "the sequences of a step (train.batch_size x train.grad_accum)");
  in.cluster = cluster_preset("cpu");
  in.cluster.memory_bytes = memory_per_rank;
  in.extra_forwards = preference_forwards(tc.method, cfg.lora.enabled, cfg.preference.reference);
  return in;
}

void check_run_memory(const RunConfig& cfg, const ModelConfig& shape, const AvailableMemory& available,
                      int64_t ranks_on_host) {
  if (available.bytes < 0) return;
  const double per_rank = double(available.bytes) / double(std::max<int64_t>(1, ranks_on_host));
  const double usable = kUsableMemoryFraction * per_rank;
  const PlanInput in = run_plan_input(cfg, shape, usable);
  // Virtual stages the schedule cannot run are refused here in the trainer's words: the pipeline's
  // buffers are counted from the schedule's order, which needs them runnable.
  parallel::check_virtual_stages(in.pp_schedule, int(in.mesh.pp), int(in.pp_virtual), in.micro_batches());
  parallel::check_pipeline_keys(in.pp_schedule, int(in.mesh.pp), in.pp_blocks);
  const MemoryBreakdown need = peak_memory(in);
  if (need.total <= usable) return;
  const auto largest = std::max_element(need.items.begin(), need.items.end(),
                                        [](const MemoryItem& a, const MemoryItem& b) { return a.bytes < b.bytes; });
  const std::string shared =
      ranks_on_host > 1 ? ", shared by " + std::to_string(ranks_on_host) + " ranks on this host" : "";
  fail("train needs " + bytes_text(need.total) + " per rank (" + largest->name + " " +
       bytes_text(largest->bytes) + "), " + bytes_text(usable) + " available (" +
       std::to_string(int(kUsableMemoryFraction * 100)) + "% of " + available.source + " " +
       bytes_text(double(available.bytes)) + shared + "): " + advice(cfg, largest->name) +
       "; MESHTRAIN_MEMORY_CHECK=off skips this check");
}

}  // namespace mt::plan
