// How the pieces of one optimizer step combine across ranks. The single-process step needs no
// such thing (a null GradientSync); data parallelism sums counts, losses and gradients over its
// group. The model never sees this: train_step calls it between backward and the optimizer.
#pragma once
#include <cstdint>

namespace mt {

class GradientSync {
 public:
  virtual ~GradientSync() = default;
  virtual int64_t sum_count(int64_t local) = 0;
  virtual double sum_loss(double local) = 0;
  virtual void sum_gradients(float* grad, int64_t n) = 0;
};

}  // namespace mt
