// Data parallelism over whole models (dp replicas, no fsdp, tp, pp or cp: a cp rank holds blocks
// of a sharded model, parallel/sharded_model.h): the model's
// ModelParallel hooks see each unit's gradients become final in the last micro-batch's backward,
// and its gradients are all-reduced in buckets as they do (gradient_buckets.h), instead of in one
// all-reduce after the backward. Counts, losses and the norm are DataParallel's.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/model_parallel.h"
#include "model/params.h"
#include "parallel/data_parallel.h"
#include "parallel/gradient_buckets.h"

namespace mt::parallel {

// Unit u's trainable gradients in `store`'s buffer (param_unit's units, 0 .. L + 1). When the
// store does not keep each unit's gradients together, one range of everything on unit 0, the
// unit whose gradients are final last.
std::vector<GradRange> unit_grad_ranges(const ParamStore& store, const ModelConfig& config);

class ReplicaGradients final : public ModelParallel, public GradientSync {
 public:
  // `trainable`: the model's trainable store; bucket_bytes as GradientBuckets takes it.
  ReplicaGradients(DataParallel& dp, ParamStore& trainable, const ModelConfig& config, int64_t bucket_bytes);

  std::string describe() const { return buckets_.describe(); }
  // Seconds waiting for the buckets after the backward, since the last reset.
  double exposed_seconds() const { return exposed_s_; }
  void reset_stats() { exposed_s_ = 0.0; }

  // ModelParallel: a unit's storage never moves; only its gradients' completion is heard.
  void release(int unit, bool grads) override;

  // GradientSync
  void begin_step(int64_t micro_batches) override { buckets_.begin_step(micro_batches); }
  int64_t sum_count(int64_t local) override { return dp_.sum_count(local); }
  double sum_loss(double local) override { return dp_.sum_loss(local); }
  void sum_losses(double* values, int64_t n) override { dp_.sum_losses(values, n); }
  void sum_gradients(ParamStore& params) override;
  double grad_norm(const ParamStore& params) override { return dp_.grad_norm(params); }

 private:
  DataParallel& dp_;
  ParamStore& store_;
  GradientBuckets buckets_;
  double exposed_s_ = 0.0;
};

}  // namespace mt::parallel
