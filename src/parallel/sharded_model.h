// A LLaMA model laid over the mesh by the partition rules: FSDP (ZeRO-3) over `fsdp` x `cp`
// (torchtitan's dp_shard x cp: a rule's fsdp split is over both, parallel/layout.h shard_spec),
// Megatron tensor parallelism over `tp`, replicas over `dp`, a mixture of experts' experts split
// over `ep` (whose ranks are replicas for every other tensor: parallel/expert_parallel.h), and under pipeline parallelism only the units
// of this rank's stage (parallel/pipeline.h stage_holds). It owns this rank's shards and implements
// the model's ModelParallel hooks, so src/model stays mesh-free:
//
//   - Every parameter is stored as the block the rules give this rank (the same blocks `meshtrain
//     shard` prints): master f32, bf16 compute copy and gradient where the tensor has them, in
//     ParamStores of their own, which the optimizer updates shard by shard.
//   - The model (a Transformer of this rank's tensor-parallel share, without storage of its own)
//     computes on whole tensors of its share. A parameter split over fsdp x cp is all-gathered into a
//     unit buffer when its unit (embedding, a block, or the head) is acquired, and freed on
//     release; the next unit's gather is issued right away so it overlaps this unit's compute.
//     A parameter not split over fsdp x cp (norms) is read in place.
//   - Gradients of a unit are reduce-scattered over fsdp x cp on release after backward
//     (non-blocking, completed while the next unit computes), which sums the cp ranks' partials
//     too; finish_gradients() then sums over dp (and over fsdp x cp for unsplit tensors, over tp
//     for adapter halves whose gradient is a partial sum), and
//     between the first and last pipeline stage for a tied embedding both hold.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "parallel/expert_parallel.h"
#include "parallel/gradient_buckets.h"
#include "parallel/mesh.h"
#include "parallel/layout.h"
#include "parallel/partition.h"
#include "parallel/scratch_pool.h"
#include "parallel/tensor_parallel.h"
#include "core/tensor_box.h"
#include "model/transformer.h"
#include "model/model_parallel.h"

namespace mt::parallel {

// One parameter as this rank holds it.
struct ShardSlot {
  std::string name;
  TensorLayout layout;
  std::vector<int64_t> full_shape;  // the whole tensor's shape
  TensorBox box;                    // this rank's block of the whole tensor
  TensorBox tp_box;                 // this rank's tensor-parallel share (what the model sees)
  std::vector<TensorBox> peer_boxes;  // every shard (fsdp x cp) peer's block, relative to tp_box,
                                      // in Mesh::shard_group order
  // Without the padding of a vocabulary tp does not divide (parallel/vocab_padding.h): the tensor's
  // shape and this rank's block of it (a prefix of `box`'s rows, empty for a block of padding
  // only), what checkpoints, loading and exports see. full_shape and box otherwise.
  std::vector<int64_t> true_shape;
  TensorBox true_box;
  bool split_fsdp = false;          // split over fsdp x cp; false: box == tp_box, read in place
  bool trainable = false;
  bool partial_over_tp = false;     // its gradient is a partial sum over tp (see finish_gradients)
  bool expert = false;              // an expert's tensor, held by one ep coordinate (summed over
                                    // dp and fsdp x cp only: the other ep ranks hold other experts)
  bool writer = false;              // first of the ranks holding this same block (saves it, counts
                                    // it in the norm); a tied embedding's copy on the last stage never
  int unit = 0;
  Param* model = nullptr;           // the model's tensor (tp share; pointers set per unit)
  Param* shard = nullptr;           // this rank's block in the shard stores
  // Which copies travel in a gather: what the model reads.
  bool gather_compute = false, gather_master = false, gather_quant = false;
  // An NF4 tensor's rows as uint16 words: [rows, words_per_row] (core/nf4.h row records).
  int64_t words_per_row() const;
};

struct ShardedParam;  // parallel/shard_plan.h

// The refusals of how rank `rank` of `shape` would hold `sp`, from shapes alone: fsdp blocks that do
// not tile the rank's tensor-parallel share, an NF4 base split across its columns by fsdp or cut
// inside an NF4 block by tp. The sharded model checks its own rank with it; a run's layout check
// (train/run_layout.h) checks every rank before any starts.
void check_rank_block(const ShardedParam& sp, const MeshShape& shape, int64_t rank);

class ShardedModel final : public ModelParallel {
 public:
  // Collective over the mesh. Throws (one line, on every rank alike) when a dimension does not
  // divide or the rules give a layout tensor parallelism cannot compute. `held_units` (per unit,
  // see ModelParallel): the units this rank's pipeline stage stores; empty: all of them.
  ShardedModel(Mesh& mesh, const ModelConfig& full, Precision precision, const LoraConfig& lora,
               const PartitionRules& rules, std::vector<bool> held_units = {},
               Backend& backend = cpu_backend());
  ~ShardedModel() override;

  Transformer& model() { return *model_; }
  const ModelConfig& full_config() const { return full_; }
  // The stores the optimizer and checkpoints work on: this rank's blocks.
  ParamStore& shard_base() { return shard_base_; }
  ParamStore& shard_adapters() { return shard_adapters_; }
  ParamStore& trainable_shards() { return lora_.enabled ? shard_adapters_ : shard_base_; }
  const std::vector<ShardSlot>& slots() const { return slots_; }
  const ShardSlot& slot(const std::string& name) const;
  // Whether this rank stores `name` (under pp, only its stage's units; under ep, only its experts).
  bool holds(const std::string& name) const { return slot_index_.count(name) > 0; }

  // Values as Transformer::init_weights gives the whole model (each tensor depends only on seed and
  // name), each rank keeping its blocks.
  void init_weights(uint64_t seed);
  // The adapters alone: A ~ N(0, lora.init_std), B = 0, a trained router's copy the router's block
  // (after the base is set), as Transformer::init_adapters.
  void init_adapters(uint64_t seed);
  // Sets this rank's block of `name` from the whole tensor's values (f32).
  void set_block_from_whole(const std::string& name, const float* whole);
  // Sets this rank's block of `name` from its own block's values (f32).
  void set_block(const std::string& name, const float* block);
  // Loads a Hugging Face checkpoint (or a llama2.c file): each rank reads only its blocks (mmap),
  // with a progress line on `progress` (may be null); adapters are initialised from adapter_seed.
  void load_weights(const std::string& path, uint64_t adapter_seed, std::ostream* progress);
  // Replaces the adapters' values with a PEFT adapter's (checked against the model first:
  // io/pretrained.h check_peft_adapter), each rank reading the whole tensors of its blocks.
  void load_adapter(const std::string& adapter_dir);
  // Collective over each replica's fsdp x cp x tp group of a stage holding `name`: the whole tensor on
  // every rank of it (for export, one tensor at a time).
  std::vector<float> gather_whole(const std::string& name);
  // Quantises this rank's block of NF4 tensor `name` from whole rows of it (rows of the block,
  // every column), so tensor parallelism's column split keeps the whole-row statistics.
  void set_quant_block(const std::string& name, const float* block_rows);

  // After the last micro-batch's backward: completes the reduce-scatters and sums the gradients
  // over the ranks that share them, so every shard holds its block of the global gradient.
  void finish_gradients();
  // The global L2 norm of the (finished) gradient: each block counted once.
  double grad_norm();
  // Seconds spent waiting for the FSDP gathers and reduce-scatters (over fsdp x cp) since the last reset (the
  // communication compute did not hide).
  double exposed_comm_seconds() const { return exposed_s_ + dp_exposed_s_; }
  void reset_comm_stats() { exposed_s_ = 0.0, dp_exposed_s_ = 0.0; }
  // Off: every unit is gathered when needed (only to measure what prefetching hides).
  void set_prefetch(bool on) { prefetch_ = on; }
  // Sequence parallelism beside tensor parallelism (Megatron's; ModelParallel::sequence_shards),
  // chosen before the first forward; nothing to do when tp = 1. The norms on the residual stream
  // then get each rank's rows' share of their gradients, summed over tp in finish_gradients.
  void set_sequence_parallel(bool on);
  // The sum over dp replicas in buckets of about `bytes` of this rank's gradient shards, each
  // all-reduced during the last micro-batch's backward once its units' shards are final
  // (gradient_buckets.h); 0: one all-reduce in finish_gradients. Nothing to do without replicas
  // (cp ranks are not replicas: they hold other blocks).
  void set_dp_buckets(int64_t bytes);
  std::string describe_gradient_reduction() const;
  // Before a step's first micro-batch (the buckets count the backward passes to come).
  void begin_step(int64_t micro_batches);
  // Seconds spent waiting for the dp gradient buckets after the backward, since the last
  // reset (part of what exposed_comm_seconds counts).
  double dp_exposed_seconds() const { return dp_exposed_s_; }

  // ModelParallel
  void acquire(int unit, bool grads, bool weights) override;
  void release(int unit, bool grads) override;
  void reduce_sum(const Tensor& partial) override {
    if (tp_) tp_->sum(partial);
  }
  void reduce_max(const Tensor& partial) override {
    if (tp_) tp_->max(partial);
  }
  bool splits_vocabulary() const override { return tp_ != nullptr; }
  int64_t vocab_begin() const override { return vocab_begin_; }
  int64_t vocab_size() const override { return full_.vocab_size; }
  int64_t vocab_share_rows() const override { return vocab_share_rows_; }
  int64_t input_column_begin(const std::string& name) const override { return slot(name).tp_box.begin.at(1); }
  bool leads_tensor_group() const override { return mesh_.coord(Axis::tp) == 0; }
  int64_t sequence_shards() const override;
  int64_t sequence_shard() const override;
  void exchange_expert_counts(const int64_t* counts, int64_t* received, int64_t n) override {
    ep_->exchange_counts(counts, received, n);
  }
  std::unique_ptr<ExpertRowsInFlight> start_expert_rows(const Tensor& recv, const std::vector<int64_t>& recv_rows,
                                                        const Tensor& send,
                                                        const std::vector<int64_t>& send_rows) override {
    return ep_->start_rows(recv, recv_rows, send, send_rows);
  }
  void gather_rows(const Tensor& whole, const Tensor& part) override { tp_->gather_rows(whole, part); }
  void sum_scatter_rows(const Tensor& part, const Tensor& whole) override { tp_->sum_scatter_rows(part, whole); }

 private:
  struct Unit;
  struct PendingScatter;
  void build_slots(const PartitionRules& rules);
  void build_units();
  void start_gather(int unit);
  void finish_gather(int unit);
  void point_model_at_shards();
  void complete_scatters();
  void sum_tied_embedding_over_stages();
  int num_units() const { return int(full_.num_hidden_layers) + 2; }

  Mesh& mesh_;
  ModelConfig full_, local_;
  Precision precision_;
  LoraConfig lora_;
  Backend& backend_;  // the shards, gathered units and collective buffers live on its device
  std::unique_ptr<Transformer> model_;
  ParamStore shard_base_, shard_adapters_;
  std::vector<ShardSlot> slots_;
  std::unordered_map<std::string, size_t> slot_index_;  // name -> its slot
  std::vector<bool> held_units_;  // per unit: stored on this rank
  ScratchPool pool_;  // declared before the units and scatters, which hold its blocks
  std::vector<std::unique_ptr<Unit>> units_;
  std::vector<std::unique_ptr<PendingScatter>> scatters_;
  std::unique_ptr<TensorParallelGroup> tp_;  // null when tp = 1
  std::unique_ptr<ExpertParallelGroup> ep_;  // null when ep = 1
  bool sequence_parallel_ = false;            // only with tp_
  int64_t vocab_begin_ = 0;
  int64_t vocab_share_rows_ = 0;  // every tp rank's vocabulary rows in the layout, padding included
  double exposed_s_ = 0.0;
  double dp_exposed_s_ = 0.0;
  bool prefetch_ = true;
  std::unique_ptr<GradientBuckets> dp_buckets_;  // dp > 1 with trainable shards
};

}  // namespace mt::parallel
