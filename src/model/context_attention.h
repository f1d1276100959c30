// The model's side of context parallelism: attention whose keys are partly on other ranks. A
// sequence split over ranks (parallel/context_parallel.h) leaves each rank some of every row's
// tokens; everything in a block but attention works token by token, so only attention needs the
// rest of the row. The block calls these in place of the backend's attention ops when the model
// has one set (Transformer::set_context_attention); what they exchange, with which ranks, stays
// outside the model.
#pragma once
#include "backend/backend.h"

namespace mt {

class ContextAttention {
 public:
  virtual ~ContextAttention() = default;
  // Like Backend::attention_forward / attention_backward on this rank's tokens: q, k, v, out,
  // lse, segments and the gradients are this rank's T tokens of each of the B rows, d is sized
  // for them (d.cp = 1); the result is exact attention over the whole rows.
  virtual void attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q,
                                 const Tensor& k, const Tensor& v, const Tensor& segments,
                                 const AttentionDims& d) = 0;
  virtual void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                                  const Tensor& dout, const Tensor& out, const Tensor& lse,
                                  const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& segments, const AttentionDims& d) = 0;
  // The block calls this at the start of its backward, before the MLP's, with the k, v and
  // segments its attention_backward will be given (unchanged until then): what the attention
  // needs from elsewhere can be on its way while the MLP's backward runs. Default: nothing.
  virtual void prefetch_backward(const Tensor& k, const Tensor& v, const Tensor& segments,
                                 const AttentionDims& d) {
    (void)k, (void)v, (void)segments, (void)d;
  }
};

}  // namespace mt
