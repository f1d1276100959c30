// The model's side of a parallel layer: where FSDP gathers and frees parameters, and where tensor
// parallelism combines partial results. LlamaModel calls these at fixed points of its forward and
// backward; what they do (all-gathers, reduce-scatters, over which ranks) stays outside the model.
#pragma once
#include <cstdint>

#include "model/partial_sums.h"

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
  virtual void acquire(int unit, bool grads, bool weights) = 0;
  virtual void release(int unit, bool grads) = 0;

  // Tensor parallelism: the group's partial sums, or null when every rank holds whole layers
  // (the model's config then has all the heads and the whole vocabulary).
  virtual PartialSums* partials() = 0;
  virtual int64_t vocab_begin() const = 0;  // first vocabulary row of this rank's embedding/head
  virtual int64_t vocab_size() const = 0;   // the whole vocabulary
};

}  // namespace mt
