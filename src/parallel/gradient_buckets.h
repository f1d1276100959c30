// Data-parallel gradient reduction in buckets issued during the backward (PyTorch DDP's buckets,
// Megatron's overlapped gradient reduce): the backward runs the units last to first, so the
// all-reduce of the last blocks' gradients moves while the first blocks' backward computes, and
// only the last bucket's is left after the backward instead of one all-reduce of everything.
//
// A unit's gradients are final once it has been released with gradients in every micro-batch of
// the step (ModelParallel::release); a bucket (consecutive units, about `bucket_bytes` of
// gradients, in one contiguous range of the store's gradient buffer) is then all-reduced in place,
// non-blocking. Sums of the same values over the same ranks in the same order as one all-reduce of
// everything (per element, MPI's sum does not depend on how a buffer is cut), so the result is
// the same as without buckets.
#pragma once
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "parallel/comm.h"

namespace mt::parallel {

// Elements [begin, end) of a gradient buffer.
struct GradRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};

class GradientBuckets {
 public:
  // `units[u]`: unit u's trainable gradients in the buffer (an empty range: none). Buckets take
  // units from the last to the first, closing when the next unit would pass bucket_bytes (a unit
  // larger than that is a bucket alone) or would not continue the bucket's range in memory;
  // bucket_bytes 0: one bucket of everything, issued at finish().
  GradientBuckets(Comm& group, std::vector<GradRange> units, int64_t bucket_bytes);

  // Before the step's first micro-batch: how many backward passes each unit will see.
  void begin_step(int64_t micro_batches);
  // Unit `unit`'s gradients of one micro-batch are complete (its release with gradients); in the
  // last micro-batch, every bucket whose units are then all final is all-reduced.
  void unit_done(int unit, float* grads);
  // After the backward: issues what is not issued yet (everything, without buckets) and waits for
  // every bucket. Returns the seconds spent waiting this step (the reduction the backward did not
  // hide), those of a bucket waited for during the backward to make room included.
  double finish(float* grads);

  size_t num_buckets() const { return buckets_.size(); }
  // "3 buckets of up to 25 MB" / "one all-reduce after the backward", for the run's log.
  std::string describe() const;

 private:
  struct Bucket {
    GradRange range;
    int first_unit = 0, last_unit = 0;  // units [first_unit, last_unit]
    Request request;
    bool issued = false;
  };
  void issue(Bucket& b, float* grads);

  // Buckets in flight at once, at most: an MPI group stages each one's input (mpi_comm.cpp), so
  // this bounds that memory to 3 buckets; a fourth waits for the oldest.
  static constexpr size_t kMaxInFlight = 3;

  Comm& group_;
  std::vector<GradRange> units_;
  std::vector<Bucket> buckets_;
  std::vector<int64_t> done_;  // per unit: releases with gradients this step
  int64_t micro_batches_ = 1;
  int64_t bucket_bytes_ = 0;
  std::deque<size_t> in_flight_;  // issued and not waited for, oldest first
  double waited_s_ = 0.0;         // waits for room during this step's backward
};

}  // namespace mt::parallel
