// Data parallelism: every rank of the group holds the whole (replicated) model, takes its own rows
// of each micro-batch, and the group sums token counts, losses and gradients. Since every rank
// scales its loss by the step's total counted tokens, the summed gradient is exactly the mean over
// all counted tokens, the same as one rank processing the whole batch (masks make per-rank counts
// differ, so this weights by tokens, not by ranks).
#pragma once
#include "data/packing.h"
#include "parallel/comm.h"
#include "parallel/gradient_sync.h"

namespace mt::parallel {

class DataParallel final : public GradientSync {
 public:
  explicit DataParallel(Comm& group) : group_(group) {}

  int ranks() const { return group_.size(); }
  int rank() const { return group_.rank(); }
  // This rank's rows of a batch: [rank * B / n, (rank + 1) * B / n). mt::Error unless n divides B.
  PackedBatch slice(const PackedBatch& full) const;

  int64_t sum_count(int64_t local) override;
  double sum_loss(double local) override;
  void sum_gradients(ParamStore& params) override;
  double grad_norm(const ParamStore& params) override;  // replicated: the local norm

 private:
  Comm& group_;
};

}  // namespace mt::parallel
