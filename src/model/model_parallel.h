// The model's side of a parallel layer: where FSDP gathers and frees parameters, and where tensor
// parallelism combines partial results. Transformer calls these at fixed points of its forward and
// backward whether or not a parallel layer is set (this base class, doing nothing, stands in for
// a model whole on one device); what they do (all-gathers, reduce-scatters, over which ranks)
// stays outside the model.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace mt {

class ModelParallel {
 public:
  virtual ~ModelParallel() = default;

  // Parameter units in forward order: 0 = embedding, 1..L = blocks, L + 1 = final norm and head
  // (a tied head is the embedding: unit 0). acquire() comes before a unit's parameters are read
  // and must leave the model's Param pointers of the unit valid; with `grads`, its gradient
  // pointers too, zeroed. release() follows the unit's last use in the pass; with `grads`, the
  // unit's gradients are then complete. A unit acquired again while held stays as it is (an
  // acquire with grads of a unit held without them adds zeroed gradients). With `weights` false
  // only the gradients are needed (the untied embedding's backward is a scatter-add of rows).
  virtual void acquire(int unit, bool grads, bool weights) {}
  virtual void release(int unit, bool grads) {}

  // Tensor parallelism (Megatron): in place, the elementwise sum / maximum of a tensor over the
  // ranks that each computed a partial result of it. The model calls reduce_sum after the
  // row-parallel o and down products (and a LoRA adapter's inner product there), after the
  // column-parallel input gradients, after the vocabulary-parallel embedding lookup and the head's
  // input gradient; reduce_max and reduce_sum around the vocabulary-parallel cross-entropy.
  // Without tensor parallelism there is nothing to combine.
  virtual void reduce_sum(const Tensor& partial) {}
  virtual void reduce_max(const Tensor& partial) {}
  // True when this rank's embedding and head hold vocabulary rows [vocab_begin(), + the config's
  // vocab_size) of vocab_size() (the model's config then has this rank's heads only).
  virtual bool splits_vocabulary() const { return false; }
  virtual int64_t vocab_begin() const { return 0; }
  virtual int64_t vocab_size() const { return 0; }
  // The rows every rank's share of the vocabulary spans in the layout: the config's vocab_size, or
  // more on the rank whose share ends in padding (a vocabulary the ranks do not divide is padded
  // in storage; the model holds its true rows only). What sizes the cross-entropy's chunks, so
  // the ranks' chunks (and their reductions) match.
  virtual int64_t vocab_share_rows() const { return 0; }
  // Sequence parallelism (Megatron's, beside tensor parallelism): between the tensor-parallel
  // regions (the norms, the residual adds, the embedding's output, the final norm) the residual
  // stream is split by rows over the tp ranks, so each holds and computes 1/S of it. Of a pass's
  // N = B*T rows this rank then holds rows [sequence_shard() * N / S, + N / S) (S =
  // sequence_shards(), 1 without it). Where a tensor-parallel region starts, its input is gathered
  // whole (gather_rows), where it ends its partial output is summed and scattered
  // (sum_scatter_rows) in place of reduce_sum's all-reduce; the backward swaps the two.
  virtual int64_t sequence_shards() const { return 1; }
  virtual int64_t sequence_shard() const { return 0; }
  // whole [N, cols] = every rank's `part` [N / S, cols] in rank order (either dtype, both the
  // same). `part` may be this rank's own rows of `whole`.
  virtual void gather_rows(const Tensor& whole, const Tensor& part) {}
  // part [N / S, cols] = this rank's rows of the sum over the ranks of their partial `whole`
  // [N, cols], summed in f32 like reduce_sum.
  virtual void sum_scatter_rows(const Tensor& part, const Tensor& whole) {}
  // Expert parallelism (parallel/expert_parallel.h): a mixture of experts' experts are split over
  // the config's expert_shards() S ranks in contiguous ranges of L = local_experts(); each rank
  // routes its own tokens, sends the rows chosen for another rank's experts there, computes its
  // experts on the rows it receives and sends the results back (model/moe.cpp).
  // counts [S * L]: this rank's rows for each rank's experts (rank major) -> received [S * L]:
  // every rank's rows for this rank's experts (rank major). Host memory.
  virtual void exchange_expert_counts(const int64_t* counts, int64_t* received, int64_t n) {
    std::copy(counts, counts + n, received);
  }
  // An exchange of rows in flight (start_expert_rows): wait() completes it (the buffers may be
  // read and reused after it); the destructor waits too, so an early return cannot leave a
  // transfer writing into reused memory.
  class ExpertRowsInFlight {
   public:
    virtual ~ExpertRowsInFlight() = default;
    virtual void wait() {}
  };
  // Starts moving rows between the ranks and returns at once, so the caller computes while they
  // travel (model/moe.cpp computes its experts on the rows it routed to itself meanwhile):
  // send_rows[p] consecutive rows of `send` (from its first) go to rank p, recv_rows[q] rows from
  // rank q land in `recv` in rank order. This rank's own block (send_rows[me] == recv_rows[me]
  // rows) is not moved: the caller reads it where it is in `send`, and recv's block for it is
  // left untouched. Until wait(), `recv`'s other blocks must not be read nor `send`'s other
  // blocks written. Both tensors have the same columns and dtype; device memory. Several
  // exchanges may be in flight at once; every rank starts them in the same order.
  virtual std::unique_ptr<ExpertRowsInFlight> start_expert_rows(const Tensor& recv,
                                                                const std::vector<int64_t>& recv_rows,
                                                                const Tensor& send,
                                                                const std::vector<int64_t>& send_rows) {
    return std::make_unique<ExpertRowsInFlight>();
  }
  // Whether this rank adds the terms every tensor-parallel rank could compute alike to a partial
  // sum that reduce_sum or sum_scatter_rows then adds over the ranks (an MoE router's input
  // gradient, an expert's row-parallel adapter output): one rank adds them, so they count once.
  virtual bool leads_tensor_group() const { return true; }
  // The first input column of the weight `name` ("model.layers.0.self_attn.o_proj.weight") this
  // rank holds: a row-parallel layer's input is split by columns. Randomness keyed by column (LoRA
  // dropout) then falls on the same elements however the layer is split. 0 when it is whole.
  virtual int64_t input_column_begin(const std::string& name) const { return 0; }
};

// The hooks of a model whole on one device: they do nothing.
inline ModelParallel& single_device() {
  static ModelParallel none;
  return none;
}

}  // namespace mt
