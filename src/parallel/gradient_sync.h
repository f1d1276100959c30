// How the pieces of one optimizer step combine across ranks. The single-process step needs no
// such thing (a null GradientSync); data parallelism sums counts, losses and gradients over its
// group; the sharded model (FSDP / tensor parallelism) completes its reduce-scatters and sums
// what its shards share. The model never sees this: train_step calls it between backward and the
// optimizer.
#pragma once
#include <cstdint>

#include "model/params.h"

namespace mt {

class GradientSync {
 public:
  virtual ~GradientSync() = default;
  // Before a step's first micro-batch (gradient buckets count the backward passes to come).
  virtual void begin_step(int64_t micro_batches) {}
  virtual int64_t sum_count(int64_t local) = 0;
  virtual double sum_loss(double local) = 0;
  // Sums each of n values over the ranks sum_loss sums over, in place (preference training's
  // per-sequence log-probabilities: each rank adds what its tokens hold, zeros elsewhere).
  virtual void sum_losses(double* values, int64_t n) = 0;
  // `params` is what the optimizer updates (this rank's shards, or the whole trainable store).
  virtual void sum_gradients(ParamStore& params) = 0;
  // The L2 norm of the whole (global) gradient, each element counted once.
  virtual double grad_norm(const ParamStore& params) = 0;
};

}  // namespace mt
