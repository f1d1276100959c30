// The model a training run updates, placed on the mesh: whole on every rank (one rank, or data
// parallelism), or sharded (FSDP and/or tensor parallelism by the partition rules, and under
// pipeline parallelism each stage's units only; see parallel/sharded_model.h). The trainer talks
// to this one interface whichever it is.
#pragma once
#include <memory>
#include <ostream>
#include <vector>

#include "data/tokenizer.h"
#include "io/model_files.h"
#include "parallel/context_parallel.h"
#include "parallel/data_parallel.h"
#include "parallel/mesh.h"
#include "parallel/pipeline.h"
#include "parallel/replica_agreement.h"
#include "parallel/sharded_model.h"
#include "model/transformer.h"
#include "train/adamw.h"
#include "train/checkpoint.h"
#include "parallel/gradient_sync.h"
#include "parallel/replica_gradients.h"
#include "train/run_config.h"

namespace mt {

class PlacedModel {
 public:
  // Builds the model of cfg (model.path, or a new one with random weights) on the mesh. Under
  // FSDP / tensor parallelism each rank holds and loads only its blocks. `dp` is the mesh's
  // data-parallel group (dp x fsdp x ep), which sums counts and losses; both must outlive this.
  // Its parameters, gradients and activations live on `backend`.
  PlacedModel(const RunConfig& cfg, parallel::Mesh& mesh, parallel::DataParallel& dp, const Tokenizer& tok,
              std::ostream& log, Backend& backend = cpu_backend());
  ~PlacedModel();

  Transformer& model() { return sharded_ ? sharded_->model() : *whole_; }
  bool sharded() const { return sharded_ != nullptr; }
  // What the optimizer updates: the whole trainable store, or this rank's blocks of it.
  ParamStore& trainable() { return sharded_ ? sharded_->trainable_shards() : whole_->trainable(); }
  // How a step combines across ranks; null on a single rank.
  GradientSync* sync();
  // Under pp: this rank's stage of the pipeline (it runs the steps' and validation's micro-batches);
  // else null. The stage stores and updates only its units (sharded further over fsdp and tp).
  parallel::Pipeline* pipeline() { return pipeline_.get(); }
  // Whole-model counts (not this rank's share).
  int64_t base_numel() const { return base_numel_; }
  int64_t trainable_numel() const { return trainable_numel_; }
  // The whole model's architecture (the model() of a tp rank computes with its share).
  const ModelConfig& full_config() { return sharded_ ? sharded_->full_config() : whole_->config(); }

  std::vector<HeldTensor> held_tensors(AdamW& optimizer);
  // After the trainable values changed outside the optimizer (a checkpoint load).
  void refresh_compute_copies();
  // Collective: rank 0 writes the trained model to `dir` (a PEFT adapter directory in LoRA runs,
  // else config.json, generation_config.json and model.safetensors, keeping model.path's config
  // keys and the tokenizer's ids: io/model_files.h); returns the files written (empty on other ranks). A
  // sharded model is gathered one tensor at a time as the file is written, so no rank ever holds
  // more than one whole tensor.
  std::vector<std::string> export_model(const std::string& dir);
  // Every block of every tensor (base and adapters) this rank holds, with the CRC32C of its
  // values: what ranks holding the same block compare (parallel/replica_agreement.h).
  std::vector<parallel::HeldBlock> held_blocks();
  // Collective: the ranks holding the same block hold the same values, after every load (the
  // start, a resume); otherwise one line naming the tensors and ranks, `what` saying where the
  // values came from.
  void require_equal_replicas(const std::string& what, const std::vector<parallel::HeldBlock>& more = {});
  // Seconds blocked waiting for FSDP's collectives and the data-parallel gradient buckets since
  // the last reset (0 on one rank).
  double exposed_comm_seconds() const;
  void reset_comm_stats();
  // How data-parallel gradients are reduced (buckets), for the log; "" when nothing is summed.
  std::string describe_gradient_reduction() const;

 private:
  const RunConfig& cfg_;
  parallel::Mesh& mesh_;
  parallel::DataParallel& dp_;
  std::unique_ptr<Transformer> whole_;
  std::unique_ptr<parallel::ShardedModel> sharded_;
  std::unique_ptr<GradientSync> sync_;
  // lora.init_adapter: the adapters' values from a PEFT adapter whose shape is the run's.
  void load_initial_adapter(const std::string& dir, const LoraConfig& lora, std::ostream& log);
  parallel::ReplicaGradients* replica_ = nullptr;  // sync_ of whole replicas (dp only)
  std::unique_ptr<parallel::DataParallel> stages_and_replicas_;  // pp x dp x fsdp x ep x cp: sums losses
  std::unique_ptr<parallel::ContextParallel> context_;           // cp > 1: attention over whole rows
  std::unique_ptr<parallel::Pipeline> pipeline_;
  int64_t base_numel_ = 0, trainable_numel_ = 0;
  ModelOrigin origin_;  // model.path and the run's tokenizer ids, for the exported config files
};

}  // namespace mt
