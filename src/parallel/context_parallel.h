// Context parallelism (the mesh's cp axis): every row of a micro-batch is cut into 2 cp chunks and
// cp rank r holds chunks r and 2 cp - 1 - r, an early chunk with few keys before it and a late
// one with many, so every rank does the same causal attention work. Everything in a block but
// attention works token by token on the rank's share; attention all-gathers the keys and values
// (and document ids) of the whole rows over the cp group first, as Llama 3 did, and its backward
// sums the keys' and values' gradients back to the ranks holding them (a reduce-scatter).
// Parameters are replicated over cp and their gradients summed over it with dp's
// (docs/distributed.md, "Context parallelism").
#pragma once
#include <cstdint>

#include "backend/device_buffer.h"
#include "data/packing.h"
#include "model/context_attention.h"
#include "parallel/comm.h"

namespace mt::parallel {

// Rank `rank`'s share of every row of `rows` under cp ranks: chunks rank and 2 cp - 1 - rank,
// back to back, with each token's true position (positions given are cut alike; none given:
// 0..seq_len-1) and document id. seq_len becomes seq_len / cp. mt::Error unless 2 cp divides
// seq_len. cp = 1: `rows` unchanged.
PackedBatch sequence_share(const PackedBatch& rows, int64_t cp, int64_t rank);

class ContextParallel final : public ContextAttention {
 public:
  // `group`: the cp ranks of this rank (ordered by their cp coordinate); `backend` holds the
  // activations and the exchange buffers.
  ContextParallel(Comm& group, Backend& backend) : group_(group), backend_(backend) {}

  void attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                         const Tensor& v, const Tensor& segments, const AttentionDims& d) override;
  void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                          const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                          const Tensor& v, const Tensor& segments, const AttentionDims& d) override;

  // Bytes this rank sent in the all-gathers and reduce-scatters so far (what the planner prices).
  int64_t bytes_sent() const { return bytes_sent_; }

 private:
  // The whole rows of a [B * T, width] share (every rank's, gathered), in sequence order, into
  // `rows` (resized to [B * cp T, width] of the share's dtype).
  Tensor gather_rows(DeviceBuffer& rows, const Tensor& share, int64_t B);
  // `share` = the sum over the cp ranks of their gradients of this rank's tokens, from this
  // rank's f32 gradient `whole` of the whole rows [B * cp T, width].
  void scatter_sum(const Tensor& share, const Tensor& whole, int64_t B);
  AttentionDims whole_dims(const AttentionDims& d) const;

  Comm& group_;
  Backend& backend_;
  DeviceBuffer gathered_;         // every rank's share, rank by rank
  DeviceBuffer keys_, values_;    // whole rows
  DeviceBuffer documents_;        // whole rows' segment ids
  DeviceBuffer dkeys_, dvalues_;  // whole rows' gradients, f32 (summed over ranks unrounded)
  DeviceBuffer send_, recv_;      // f32 reduce-scatter staging
  int64_t bytes_sent_ = 0;
};

}  // namespace mt::parallel
