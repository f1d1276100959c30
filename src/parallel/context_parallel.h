// Context parallelism (the mesh's cp axis): every row of a micro-batch is cut into 2 cp chunks and
// cp rank r holds chunks r and 2 cp - 1 - r, an early chunk with few keys before it and a late
// one with many, so every rank does the same causal attention work. Everything in a block but
// attention works token by token on the rank's share; attention all-gathers the keys and values
// (and document ids) of the whole rows over the cp group first, as Llama 3 did, and its backward
// sums the keys' and values' gradients back to the ranks holding them (a reduce-scatter). The
// backward's gathers are issued at the start of the block's backward and travel behind its MLP.
// Parameters, gradients and optimizer state are sharded over fsdp x cp (parallel/layout.h
// shard_spec; docs/distributed.md, "Context parallelism").
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
  // Issues the backward's all-gathers of k, v and the segments (non-blocking), which
  // attention_backward then waits for: they travel while the block's MLP backward runs.
  void prefetch_backward(const Tensor& k, const Tensor& v, const Tensor& segments,
                         const AttentionDims& d) override;

  // Bytes this rank sent in the all-gathers and reduce-scatters so far (what the planner prices).
  int64_t bytes_sent() const { return bytes_sent_; }

 private:
  // One all-gather of a rank's share [B * T, width] in flight: every rank's share, rank by rank,
  // lands in `staging`; `share` is what was sent (a prefetch is matched by it).
  struct Gather {
    void* staging = nullptr;
    Tensor share;
    Request request;
  };
  // The K, V and document-id gathers, issued together and waited for together.
  struct Gathers {
    Gather k, v, docs;
    bool pending() const { return bool(k.request); }
  };
  // Issues the gathers of k, v and (when given) segments into staging that is free until the
  // attention kernel runs: the gather staging and the whole rows' f32 gradient buffers, which
  // the backward writes only after the gathered rows are reordered out of them (so overlapping
  // needs no memory beyond the blocking form's).
  void start(const Tensor& k, const Tensor& v, const Tensor& segments);
  // Waits for the gathers and reorders them into the whole rows (keys_, values_, documents_).
  struct Whole {
    Tensor keys, values, docs;
  };
  Whole finish(int64_t B);
  void start_one(Gather& g, void* staging, const Tensor& share);
  // The whole rows of the share gathered by `g`, in sequence order, into `rows` (resized to
  // [B * cp T, width] of the share's dtype).
  Tensor finish_one(Gather& g, DeviceBuffer& rows, int64_t B);
  // dk, dv = the sums over the cp ranks of their gradients of this rank's tokens, from this
  // rank's f32 gradients of the whole rows in dkeys_ and dvalues_ [B * cp T, width] (both
  // reduce-scatters in flight at once; dkeys_ and dvalues_ are overwritten).
  void scatter_sum(const Tensor& dk, const Tensor& dv, int64_t B);
  AttentionDims whole_dims(const AttentionDims& d) const;
  // The whole rows' f32 gradient buffers, for cp x `n` share elements.
  void reserve_gradients(int64_t n);

  Comm& group_;
  Backend& backend_;
  DeviceBuffer gathered_;         // gather staging of the keys (i32 words)
  DeviceBuffer keys_, values_;    // whole rows
  DeviceBuffer documents_;        // whole rows' segment ids
  DeviceBuffer dkeys_, dvalues_;  // whole rows' gradients, f32 (summed over ranks unrounded);
                                  // before the kernel writes them: the values' and documents' staging
  DeviceBuffer send_, recv_;      // f32 reduce-scatter staging
  Gathers inflight_;
  int64_t bytes_sent_ = 0;
};

}  // namespace mt::parallel
