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
  explicit DataParallel(Comm& group) : group_(group), tokens_(group) {}
  // With context parallelism: `rows` (dp x fsdp x ep) share out a batch's rows, `cp` splits each row
  // (parallel/context_parallel.h), and `tokens` (dp x fsdp x ep x cp, every rank seeing other tokens)
  // sums counts, losses and gradients.
  DataParallel(Comm& rows, Comm& tokens, Comm& cp) : group_(rows), tokens_(tokens), cp_(&cp) {}

  int ranks() const { return group_.size(); }
  int rank() const { return group_.rank(); }
  // Whether slice() cuts anything: more than one rank of rows or of context.
  bool splits() const { return group_.size() > 1 || tokens_.size() > group_.size(); }
  // Whether sums go over more than this rank.
  bool sums() const { return tokens_.size() > 1; }
  // The ranks that sum counts, losses and gradients (dp x fsdp x ep x cp).
  Comm& tokens() { return tokens_; }
  // This rank's rows of a batch, [rank * B / n, (rank + 1) * B / n), and of those its share of
  // every row under context parallelism. mt::Error unless n divides B (or 2 cp the row length).
  PackedBatch slice(const PackedBatch& full) const;
  // This rank's share of every row of `rows` under context parallelism (`rows` itself without).
  PackedBatch sequence(const PackedBatch& rows) const;

  int64_t sum_count(int64_t local) override;
  double sum_loss(double local) override;
  void sum_losses(double* values, int64_t n) override;
  void sum_gradients(ParamStore& params) override;
  double grad_norm(const ParamStore& params) override;  // replicated: the local norm

 private:
  Comm& group_;
  Comm& tokens_;
  Comm* cp_ = nullptr;
};

}  // namespace mt::parallel
