// Gradient buckets (parallel/gradient_buckets.h) on a recording group: which ranges form a bucket,
// that a bucket is all-reduced exactly when its units' gradients are final (the last micro-batch's
// release of each), never earlier, and that finish() issues what the backward did not and waits
// for every bucket. Real ranks: tests/test_overlap.cpp and tests/mpi/test_comm_progress.cpp.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "parallel/gradient_buckets.h"

namespace mt::parallel {
namespace {

// A one-rank group that records the non-blocking all-reduces (offset into `base`, count) and
// which of them have been waited for.
class RecordingComm final : public Comm {
 public:
  explicit RecordingComm(const float* base) : base_(base) {}
  struct Call {
    int64_t offset, n;
    bool waited = false;
  };
  std::vector<Call> calls;

  int rank() const override { return 0; }
  int size() const override { return 1; }
  void barrier() override {}
  void all_reduce_sum(float*, int64_t) override { ++blocking_calls; }
  void all_reduce_sum(double*, int64_t) override {}
  void all_reduce_sum(int64_t*, int64_t) override {}
  void all_reduce_max(float*, int64_t) override {}
  void all_gather_bytes(const void*, void*, int64_t, int) override {}
  void reduce_scatter_sum(const float*, float*, int64_t) override {}
  void broadcast_bytes(void*, int64_t, int) override {}
  Request iall_gather_bytes(const void*, void*, int64_t, int) override { return nullptr; }
  Request ireduce_scatter_sum(const float*, float*, int64_t) override { return nullptr; }
  Request iall_reduce_sum(float* data, int64_t n) override {
    calls.push_back({data - base_, n});
    struct Waited final : CommRequest {
      Waited(std::vector<Call>& c, size_t i) : calls(c), index(i) {}
      void wait() override { calls[index].waited = true; }
      std::vector<Call>& calls;
      size_t index;
    };
    return std::make_unique<Waited>(calls, calls.size() - 1);
  }
  void send_bytes(const void*, int64_t, int, int) override {}
  void recv_bytes(void*, int64_t, int, int) override {}
  Request isend_bytes(const void*, int64_t, int, int) override { return nullptr; }
  Request irecv_bytes(void*, int64_t, int, int) override { return nullptr; }
  std::unique_ptr<Comm> split(int, int) override { return nullptr; }
  [[noreturn]] void abort(int) override { std::abort(); }
  int blocking_calls = 0;

 private:
  const float* base_;
};

// Units 0..3 with 10, 20, 20 and 5 gradients, back to back (a store in unit order).
std::vector<GradRange> four_units() { return {{0, 10}, {10, 30}, {30, 50}, {50, 55}}; }

TEST(GradientBuckets, UnitsGroupLastToFirstUpToTheBucketSize) {
  std::vector<float> grads(55);
  RecordingComm comm(grads.data());
  GradientBuckets b(comm, four_units(), 25 * 4);  // 25 floats
  EXPECT_EQ(b.num_buckets(), 3u);  // {3, 2} = 25, {1} (+ 10 would pass 25), {0}
  b.begin_step(1);
  b.unit_done(3, grads.data());
  EXPECT_TRUE(comm.calls.empty());  // unit 2 is in the same bucket and not final yet
  b.unit_done(2, grads.data());
  ASSERT_EQ(comm.calls.size(), 1u);
  EXPECT_EQ(comm.calls[0].offset, 30);
  EXPECT_EQ(comm.calls[0].n, 25);
  b.unit_done(1, grads.data());
  b.unit_done(0, grads.data());
  ASSERT_EQ(comm.calls.size(), 3u);
  EXPECT_EQ(comm.calls[1].offset, 10);
  EXPECT_EQ(comm.calls[1].n, 20);
  EXPECT_EQ(comm.calls[2].offset, 0);
  EXPECT_EQ(comm.calls[2].n, 10);
  for (const auto& c : comm.calls) EXPECT_FALSE(c.waited);
  b.finish(grads.data());
  EXPECT_EQ(comm.calls.size(), 3u);  // nothing left to issue
  for (const auto& c : comm.calls) EXPECT_TRUE(c.waited);
  EXPECT_EQ(comm.blocking_calls, 0);
}

TEST(GradientBuckets, OnlyTheLastMicroBatchIssues) {
  std::vector<float> grads(55);
  RecordingComm comm(grads.data());
  GradientBuckets b(comm, four_units(), 25 * 4);
  for (int step = 0; step < 2; ++step) {
    comm.calls.clear();
    b.begin_step(3);
    for (int micro = 0; micro < 3; ++micro) {
      for (int u = 3; u >= 0; --u) b.unit_done(u, grads.data());
      EXPECT_EQ(comm.calls.size(), micro < 2 ? 0u : 3u) << "step " << step << " micro-batch " << micro;
    }
    b.finish(grads.data());
    EXPECT_EQ(comm.calls.size(), 3u);
  }
}

TEST(GradientBuckets, NoBucketSizeIsOneAllReduceAfterTheBackward) {
  std::vector<float> grads(55);
  RecordingComm comm(grads.data());
  GradientBuckets b(comm, four_units(), 0);
  EXPECT_EQ(b.num_buckets(), 1u);
  b.begin_step(1);
  for (int u = 3; u >= 0; --u) b.unit_done(u, grads.data());
  EXPECT_TRUE(comm.calls.empty());
  b.finish(grads.data());
  ASSERT_EQ(comm.calls.size(), 1u);
  EXPECT_EQ(comm.calls[0].offset, 0);
  EXPECT_EQ(comm.calls[0].n, 55);
}

TEST(GradientBuckets, UnitsWithoutGradientsOrOutOfOrderInMemory) {
  std::vector<float> grads(40);
  RecordingComm comm(grads.data());
  // Unit 1 has no trainable gradients (a frozen embedding's unit under LoRA would be unit 0);
  // unit 3's gradients lie before unit 2's: it cannot extend unit 2's bucket downwards.
  GradientBuckets b(comm, {{0, 10}, {}, {30, 40}, {10, 30}}, 1000);
  EXPECT_EQ(b.num_buckets(), 3u);  // {3}, {2}, {0}: 2 does not continue 3's range, 0 not 2's
  b.begin_step(1);
  b.unit_done(3, grads.data());
  b.unit_done(2, grads.data());
  b.unit_done(1, grads.data());
  ASSERT_EQ(comm.calls.size(), 2u);
  b.unit_done(0, grads.data());
  ASSERT_EQ(comm.calls.size(), 3u);
  int64_t covered = 0;
  for (const auto& c : comm.calls) covered += c.n;
  EXPECT_EQ(covered, 40);
  b.finish(grads.data());
}

TEST(GradientBuckets, AtMostThreeInFlight) {
  std::vector<float> grads(60);
  RecordingComm comm(grads.data());
  std::vector<GradRange> units;
  for (int64_t u = 0; u < 6; ++u) units.push_back({10 * u, 10 * u + 10});
  GradientBuckets b(comm, units, 10 * 4);  // a bucket per unit
  b.begin_step(1);
  for (int u = 5; u >= 0; --u) b.unit_done(u, grads.data());
  ASSERT_EQ(comm.calls.size(), 6u);
  // Issuing the 4th waited for the 1st, the 5th for the 2nd, the 6th for the 3rd.
  EXPECT_TRUE(comm.calls[0].waited && comm.calls[1].waited && comm.calls[2].waited);
  EXPECT_FALSE(comm.calls[3].waited || comm.calls[4].waited || comm.calls[5].waited);
  b.finish(grads.data());
  for (const auto& c : comm.calls) EXPECT_TRUE(c.waited);
}

}  // namespace
}  // namespace mt::parallel
