// Megatron-style tensor parallelism, the parts outside the model: the share of the model one tp
// rank computes (its attention heads, MLP columns and vocabulary rows, the whole hidden size) and
// the partial sums over the tp group. The model (src/model/block.cpp) does the rest at the points
// PartialSums marks: one all-reduce after the row-parallel o and down products in forward, one
// after the column-parallel input gradients in backward, and the vocabulary-parallel embedding and
// cross-entropy, so the logits are never gathered whole.
#pragma once
#include <cstdint>

#include "parallel/comm.h"
#include "model/config.h"
#include "model/partial_sums.h"

namespace mt::parallel {

// The config one of `tp` ranks computes with: num_attention_heads, num_key_value_heads,
// intermediate_size and vocab_size divided by tp, hidden_size and head_dim kept. Throws one line
// naming the size that does not divide (each rank must hold whole heads).
LlamaConfig tensor_parallel_config(const LlamaConfig& full, int64_t tp);

// PartialSums over a communicator (the tp group).
class CommPartialSums final : public PartialSums {
 public:
  explicit CommPartialSums(Comm& group) : group_(group) {}
  void sum(float* data, int64_t n) override { group_.all_reduce_sum(data, n); }
  void max(float* data, int64_t n) override { group_.all_reduce_max(data, n); }

 private:
  Comm& group_;
};

}  // namespace mt::parallel
