// The progress engine (parallel/mpi_progress.h) on real ranks: in every mode the non-blocking
// operations give exact values, in the order each rank asked for them, interleaved with blocking
// calls on the same group (the thread issues a group's queue before any other call on it goes);
// and with the thread, an operation completes while the main thread does no MPI call at all.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "parallel/comm.h"

namespace mt::parallel {
namespace {

struct CommProgressTest : ::testing::TestWithParam<CommProgress> {
  void SetUp() override {
    ASSERT_TRUE(launched_with_mpi()) << "run under mpirun";
    world = make_world_comm();
    set_comm_progress(GetParam());
  }
  void TearDown() override { set_comm_progress(CommProgress::off); }
  std::unique_ptr<Comm> world;
};

TEST_P(CommProgressTest, NonBlockingCallsInterleavedWithBlockingOnesGiveExactValues) {
  const int n = world->size(), r = world->rank();
  const int64_t k = 100000;  // large enough for Open MPI's rendezvous and libnbc's rounds
  std::vector<float> a(static_cast<size_t>(k)), b(static_cast<size_t>(k)), gathered(static_cast<size_t>(n * 2)),
      scattered(static_cast<size_t>(k));
  std::vector<float> rs_in(size_t(k * n));
  for (int64_t i = 0; i < k; ++i) a[size_t(i)] = float(r + 1), b[size_t(i)] = float((i % 7) * (r + 1));
  for (int64_t i = 0; i < k * n; ++i) rs_in[size_t(i)] = float(i % 5);
  const float mine[2] = {float(10 * r), float(10 * r + 1)};
  auto ra = world->iall_reduce_sum(a.data(), k);
  auto g = world->iall_gather(mine, gathered.data(), 2);
  float blocking = float(r);  // a blocking call on the same group while three are in flight
  world->all_reduce_sum(&blocking, 1);
  auto rb = world->iall_reduce_sum(b.data(), k);
  auto rs = world->ireduce_scatter_sum(rs_in.data(), scattered.data(), k);
  // Point to point around the ring, beside the collectives.
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  std::vector<int32_t> sent(size_t(k), r), got(size_t(k), -1);
  auto s = world->isend_bytes(sent.data(), k * 4, next, 7);
  auto v = world->irecv_bytes(got.data(), k * 4, prev, 7);
  rb->wait(), ra->wait(), rs->wait(), g->wait(), s->wait(), v->wait();
  const float ranks = float(n * (n - 1) / 2);
  EXPECT_EQ(blocking, ranks);
  for (int64_t i = 0; i < k; i += 997) {
    ASSERT_EQ(a[size_t(i)], ranks + float(n)) << i;
    ASSERT_EQ(b[size_t(i)], float(i % 7) * (ranks + float(n))) << i;
    ASSERT_EQ(scattered[size_t(i)], float(n * ((r * k + i) % 5))) << i;
    ASSERT_EQ(got[size_t(i)], prev) << i;
  }
  for (int i = 0; i < n; ++i) EXPECT_EQ(gathered[size_t(2 * i)], float(10 * i));
}

TEST_P(CommProgressTest, ManyBucketsInFlightKeepTheirOrder) {
  // Gradient buckets: many all-reduces of different sizes issued back to back, then waited for in
  // another order; a blocking sum between every few.
  const int n = world->size(), r = world->rank();
  std::vector<std::vector<float>> buffers;
  std::vector<Request> requests;
  for (int i = 0; i < 12; ++i) {
    buffers.emplace_back(size_t(1000 * (i + 1)), float(r + i));
    requests.push_back(world->iall_reduce_sum(buffers.back().data(), int64_t(buffers.back().size())));
    if (i % 4 == 3) {
      double d = 1.0;
      world->all_reduce_sum(&d, 1);
      EXPECT_EQ(d, double(n));
    }
  }
  for (int i = 11; i >= 0; --i) requests[size_t(i)]->wait();
  const float ranks = float(n * (n - 1) / 2);
  for (int i = 0; i < 12; ++i)
    for (float x : buffers[size_t(i)]) ASSERT_EQ(x, ranks + float(n * i)) << i;
}

TEST_P(CommProgressTest, TheThreadCompletesWhatNoOneWaitsFor) {
  if (GetParam() != CommProgress::thread) GTEST_SKIP() << "only the thread moves requests on its own";
  const ProgressCounters before = comm_progress_counters();
  std::vector<float> x(100000, 1.0f);
  auto req = world->iall_reduce_sum(x.data(), int64_t(x.size()));
  // No MPI call on this thread until the engine reports the completion (bounded, for a stuck one).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (comm_progress_counters().completed_by_poll == before.completed_by_poll &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_GT(comm_progress_counters().completed_by_poll, before.completed_by_poll);
  req->wait();
  EXPECT_EQ(x[0], float(world->size()));
}

INSTANTIATE_TEST_SUITE_P(Modes, CommProgressTest,
                         ::testing::Values(CommProgress::thread, CommProgress::ops, CommProgress::off),
                         [](const auto& info) { return std::string(comm_progress_name(info.param)); });

}  // namespace
}  // namespace mt::parallel
