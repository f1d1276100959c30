// The layout of a whole model on a mesh and the bytes each rank holds, from shapes alone. Shared
// by `meshtrain shard` and the planner, so both count exactly what the trainer places.
#pragma once
#include <cstdint>
#include <vector>

#include "parallel/layout.h"
#include "parallel/pipeline.h"
#include "model/param_shapes.h"

namespace mt::parallel {

// Bytes per element under bf16 mixed-precision AdamW: every tensor keeps a bf16 copy for the
// GEMMs; a trainable one adds an f32 master, an f32 gradient and f32 Adam m and v (2+4+4+8 = 18).
// A frozen (LoRA base) tensor is bf16 only (2); with lora.base_dtype = "nf4" a block's projection
// is its NF4 records (core/nf4.h: ~4.13 bits a weight).
inline constexpr int64_t kBf16Bytes = 2, kMasterBytes = 4, kGradBytes = 4, kAdamBytes = 8;

struct ShardedParam {
  ParamShape param;
  bool trainable = true;
  bool nf4 = false;  // held as NF4 records
  TensorLayout layout;
};

// Which pipeline stage holds which parameters: the trainer's stage_holds (parallel/pipeline.h) over
// `blocks`, one count per pp stage, a parameter belonging to its param_unit. No blocks: one stage
// holding every tensor.
struct StageSplit {
  ModelConfig config;
  std::vector<int64_t> blocks;  // per chunk: pp x chunks counts
  int chunks = 1;               // per stage (train.pp_virtual)

  int64_t stages() const { return blocks.empty() ? 1 : int64_t(blocks.size()) / chunks; }
  bool holds(int stage, const std::string& name) const;
  std::vector<int> stages_holding(const std::string& name) const;  // ascending
};

struct RankBytes {
  int64_t rank = 0;
  int64_t elements = 0;            // local elements of every tensor
  int64_t trainable_elements = 0;  // of which trainable
  int64_t nf4_elements = 0;        // of which NF4
  int64_t nf4_bytes = 0;           // their records
  int64_t weights_bf16() const { return (elements - nf4_elements) * kBf16Bytes; }
  int64_t weights_nf4() const { return nf4_bytes; }
  int64_t master_f32() const { return trainable_elements * kMasterBytes; }
  int64_t grads_f32() const { return trainable_elements * kGradBytes; }
  int64_t adam_f32() const { return trainable_elements * kAdamBytes; }
  int64_t total() const { return weights_bf16() + weights_nf4() + master_f32() + grads_f32() + adam_f32(); }
};

// Every parameter's layout by the first matching rule, an expert's placed on its ep coordinate;
// with `lora_training` only adapters are trainable, otherwise every tensor is. Throws for an
// unmatched name, an indivisible dim or experts ep does not divide. With
// `nf4_base` the blocks' projections are NF4, laid out by nf4_base_rules ahead of `rules`.
std::vector<ShardedParam> shard_params(const std::vector<ParamShape>& params, bool lora_training,
                                       const PartitionRules& rules, const MeshShape& mesh,
                                       bool nf4_base = false);

// Under pp a rank holds only the tensors its stage holds (`stages`: one block count per pp stage),
// under ep only its own experts (TensorLayout::ep_owner), each split by the rank's fsdp and tp
// blocks as without a pipeline.
std::vector<RankBytes> bytes_per_rank(const std::vector<ShardedParam>& params, const MeshShape& mesh,
                                      const StageSplit& stages = {});

// The same bytes for one unsharded copy of the model state (what a single device would hold).
RankBytes unsharded_bytes(const std::vector<ShardedParam>& params);

}  // namespace mt::parallel
