// Every collective of MpiComm gives the exact values on the ranks mpirun started.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "parallel/comm.h"

namespace mt::parallel {
namespace {

struct MpiCommTest : ::testing::Test {
  void SetUp() override {
    ASSERT_TRUE(launched_with_mpi()) << "run under mpirun";
    world = make_world_comm();
  }
  std::unique_ptr<Comm> world;
};

TEST_F(MpiCommTest, AllReduceSumOfEveryType) {
  const int n = world->size(), r = world->rank();
  std::vector<float> f = {float(r), 1.0f, float(r * r)};
  world->all_reduce_sum(f.data(), 3);
  const double ranks = n * (n - 1) / 2.0, squares = (n - 1) * n * (2 * n - 1) / 6.0;
  EXPECT_EQ(f[0], float(ranks));
  EXPECT_EQ(f[1], float(n));
  EXPECT_EQ(f[2], float(squares));
  double d = 0.5 + r;
  world->all_reduce_sum(&d, 1);
  EXPECT_EQ(d, 0.5 * n + ranks);
  int64_t big = (int64_t(1) << 40) + r;  // beyond int32 and float precision
  world->all_reduce_sum(&big, 1);
  EXPECT_EQ(big, n * (int64_t(1) << 40) + int64_t(ranks));
}

TEST_F(MpiCommTest, AllGatherInRankOrder) {
  const int n = world->size(), r = world->rank();
  std::vector<float> in = {float(10 * r), float(10 * r + 1)}, out(size_t(2 * n));
  world->all_gather(in.data(), out.data(), 2);
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(out[size_t(2 * i)], float(10 * i));
    EXPECT_EQ(out[size_t(2 * i + 1)], float(10 * i + 1));
  }
  // In place, 2-byte elements (bf16 shards travel this way).
  std::vector<uint16_t> buf(size_t(n), 0);
  buf[size_t(r)] = uint16_t(100 + r);
  world->all_gather_bytes(&buf[size_t(r)], buf.data(), 1, 2);
  for (int i = 0; i < n; ++i) EXPECT_EQ(buf[size_t(i)], 100 + i);
}

TEST_F(MpiCommTest, ReduceScatterSumsEachRanksBlock) {
  const int n = world->size(), r = world->rank();
  const int64_t k = 3;
  std::vector<float> in(size_t(k * n)), out(static_cast<size_t>(k));
  for (int64_t i = 0; i < k * n; ++i) in[size_t(i)] = float(i + 100 * r);
  world->reduce_scatter_sum(in.data(), out.data(), k);
  const double ranks = n * (n - 1) / 2.0;
  for (int64_t i = 0; i < k; ++i) EXPECT_EQ(out[size_t(i)], float(n * (r * k + i) + 100 * ranks));
}

TEST_F(MpiCommTest, NonBlockingGatherAndReduceScatter) {
  const int n = world->size(), r = world->rank();
  std::vector<float> in = {float(r)}, out(static_cast<size_t>(n));
  std::vector<float> rs_in(size_t(n), 1.0f), rs_out(1);
  auto g = world->iall_gather(in.data(), out.data(), 1);
  auto s = world->ireduce_scatter_sum(rs_in.data(), rs_out.data(), 1);  // two in flight at once
  s->wait();
  g->wait();
  g->wait();  // idempotent
  for (int i = 0; i < n; ++i) EXPECT_EQ(out[size_t(i)], float(i));
  EXPECT_EQ(rs_out[0], float(n));
}

TEST_F(MpiCommTest, BroadcastBarrierAndSplit) {
  const int n = world->size(), r = world->rank();
  int64_t v[2] = {r == 1 ? 42 : -1, r == 1 ? 7 : -1};
  world->broadcast(v, 2, 1);
  EXPECT_EQ(v[0], 42);
  EXPECT_EQ(v[1], 7);
  world->barrier();
  auto half = world->split(r % 2, r);
  EXPECT_EQ(half->size(), n / 2);
  EXPECT_EQ(half->rank(), r / 2);
  float x = float(r);
  half->all_reduce_sum(&x, 1);
  float want = 0;
  for (int i = r % 2; i < n; i += 2) want += float(i);
  EXPECT_EQ(x, want);
}

}  // namespace
}  // namespace mt::parallel
