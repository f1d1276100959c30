// Megatron-style tensor parallelism, the parts outside the model: the share of the model one tp
// rank computes (its attention heads, MLP columns and vocabulary rows, the whole hidden size) and
// the partial sums over the tp group. The model (src/model/block.cpp) does the rest at the points
// where it calls ModelParallel::reduce_sum: one all-reduce after the row-parallel o and down products in forward, one
// after the column-parallel input gradients in backward, and the vocabulary-parallel embedding and
// cross-entropy, so the logits are never gathered whole.
#pragma once
#include <cstdint>

#include "backend/device_buffer.h"
#include "model/config.h"
#include "parallel/comm.h"

namespace mt::parallel {

// The config tp rank `tp_rank` of `tp` computes with: num_attention_heads, num_key_value_heads,
// intermediate_size and moe_intermediate_size divided by tp, hidden_size and head_dim kept, head_shards = tp and
// head_shard = tp_rank (a whole-projection q/k norm's weights whole), and vocab_size the rank's true
// rows of the vocabulary padded to a multiple of tp (parallel/vocab_padding.h: the last rank's are
// fewer when tp does not divide it). Throws one line naming the size that does not divide (each
// rank must hold whole heads).
ModelConfig tensor_parallel_config(const ModelConfig& full, int64_t tp, int64_t tp_rank = 0);

// Elementwise sums and maxima of partial results over the tp group, in place, for tensors of any
// float dtype: bf16 partials are summed in f32, so the reduction adds no rounding beyond the
// final conversion.
class TensorParallelGroup {
 public:
  TensorParallelGroup(Comm& group, Backend& backend) : group_(group), backend_(backend) {}
  void sum(const Tensor& partial);
  void max(const Tensor& partial);
  // Sequence parallelism (ModelParallel::gather_rows, sum_scatter_rows): whole [R * tp, cols] =
  // every rank's part [R, cols] in rank order (bytes: any dtype; part may be its own rows of
  // whole), and part = this rank's rows of the f32 sum of every rank's partial whole.
  void gather_rows(const Tensor& whole, const Tensor& part);
  void sum_scatter_rows(const Tensor& part, const Tensor& whole);

 private:
  void reduce(const Tensor& partial, bool max);  // in f32 (bf16 widened in staging_), in place
  // The first n f32 elements of staging_ (from `at`), grown as needed.
  Tensor staged(int64_t at, int64_t rows, int64_t cols);

  Comm& group_;
  Backend& backend_;
  DeviceBuffer staging_;
};

}  // namespace mt::parallel
