// Every collective of StagedComm on device buffers gives what MpiComm gives on the same values in
// host memory, on the ranks mpirun started. The device is the reference backend's memory, tagged
// apart from the CPU's, so a buffer handed to MPI without passing through the backend's copies is
// caught; staged_bytes proves each call went device -> host -> device.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "backend/device_buffer.h"
#include "backend/reference_backend.h"
#include "parallel/checked_comm.h"
#include "parallel/staged_comm.h"

namespace mt::parallel {
namespace {

struct StagedCommTest : ::testing::Test {
  void SetUp() override {
    ASSERT_TRUE(launched_with_mpi()) << "run under mpirun";
    world = make_world_comm();
    staged = std::make_unique<StagedComm>(*world, reference_backend());
  }
  // n elements of T on the reference backend's device holding `values`.
  template <class T>
  DeviceBuffer on_device(const std::vector<T>& values) {
    DeviceBuffer b(reference_backend(), DType::f32, int64_t(values.size() * sizeof(T) / 4));
    reference_backend().copy_from_host(b.tensor(), values.data());
    return b;
  }
  template <class T>
  std::vector<T> from_device(const DeviceBuffer& b) {
    std::vector<T> out(b.bytes() / sizeof(T));
    reference_backend().copy_to_host(out.data(), b.tensor());
    return out;
  }
  std::unique_ptr<Comm> world;
  std::unique_ptr<StagedComm> staged;
};

TEST_F(StagedCommTest, AllReducesEqualMpi) {
  const int r = world->rank();
  std::vector<float> f = {float(r) + 0.25f, -1.5f * float(r), 3.0f};
  std::vector<double> d = {0.1 * r, 1e300 / (r + 1)};
  std::vector<int64_t> i = {(int64_t(1) << 40) + r, -r};
  std::vector<float> m = {float(r % 3), -float(r)};
  DeviceBuffer df = on_device(f), dd = on_device(d), di = on_device(i), dm = on_device(m);
  const int64_t before = staged->staged_bytes();
  staged->all_reduce_sum(df.as<float>(), 3);
  staged->all_reduce_sum(static_cast<double*>(dd.data()), 2);
  staged->all_reduce_sum(static_cast<int64_t*>(di.data()), 2);
  staged->all_reduce_max(dm.as<float>(), 2);
  EXPECT_EQ(staged->staged_bytes() - before, 2 * (12 + 16 + 16 + 8));  // there and back
  world->all_reduce_sum(f.data(), 3);
  world->all_reduce_sum(d.data(), 2);
  world->all_reduce_sum(i.data(), 2);
  world->all_reduce_max(m.data(), 2);
  EXPECT_EQ(from_device<float>(df), f);
  EXPECT_EQ(from_device<double>(dd), d);
  EXPECT_EQ(from_device<int64_t>(di), i);
  EXPECT_EQ(from_device<float>(dm), m);
}

TEST_F(StagedCommTest, GathersAndReduceScattersEqualMpi) {
  const int n = world->size(), r = world->rank();
  // bf16-sized elements, gathered out of place and in place (FSDP's shards travel so).
  std::vector<uint16_t> in = {uint16_t(100 + r), uint16_t(200 + r)}, out(size_t(2 * n));
  DeviceBuffer din = on_device(in), dout = on_device(out);
  staged->all_gather_bytes(din.data(), dout.data(), 2, 2);
  world->all_gather_bytes(in.data(), out.data(), 2, 2);
  EXPECT_EQ(from_device<uint16_t>(dout), out);
  std::vector<uint16_t> inplace(size_t(2 * n), 0);
  inplace[size_t(2 * r)] = uint16_t(7 * r), inplace[size_t(2 * r + 1)] = uint16_t(7 * r + 1);
  DeviceBuffer dinplace = on_device(inplace);
  staged->all_gather_bytes(static_cast<uint16_t*>(dinplace.data()) + 2 * r, dinplace.data(), 2, 2);
  world->all_gather_bytes(&inplace[size_t(2 * r)], inplace.data(), 2, 2);
  EXPECT_EQ(from_device<uint16_t>(dinplace), inplace);

  std::vector<float> rs_in(size_t(3 * n)), rs_out(3);
  for (size_t k = 0; k < rs_in.size(); ++k) rs_in[k] = float(k) * 0.5f + float(r);
  DeviceBuffer drs_in = on_device(rs_in), drs_out = on_device(rs_out);
  staged->reduce_scatter_sum(drs_in.as<float>(), drs_out.as<float>(), 3);
  world->reduce_scatter_sum(rs_in.data(), rs_out.data(), 3);
  EXPECT_EQ(from_device<float>(drs_out), rs_out);
}

TEST_F(StagedCommTest, NonBlockingCallsLandOnTheDeviceAtWait) {
  const int n = world->size(), r = world->rank();
  std::vector<float> in = {float(r), float(-r)}, out(size_t(2 * n)), rs_in(size_t(n), float(r + 1)), rs_out(1);
  DeviceBuffer din = on_device(in), dout = on_device(out), drs_in = on_device(rs_in), drs_out = on_device(rs_out);
  Request g = staged->iall_gather(din.as<float>(), dout.as<float>(), 2);
  Request s = staged->ireduce_scatter_sum(drs_in.as<float>(), drs_out.as<float>(), 1);  // two in flight
  s->wait();
  g->wait();
  g->wait();  // idempotent
  world->all_gather(in.data(), out.data(), 2);
  world->reduce_scatter_sum(rs_in.data(), rs_out.data(), 1);
  EXPECT_EQ(from_device<float>(dout), out);
  EXPECT_EQ(from_device<float>(drs_out), rs_out);
  EXPECT_EQ(rs_out[0], float(n * (n + 1) / 2));
}

TEST_F(StagedCommTest, BroadcastSendsAndReceivesEqualMpi) {
  const int n = world->size(), r = world->rank();
  std::vector<int32_t> b = {r == 1 ? 42 : -1, r == 1 ? 7 : -1};
  DeviceBuffer db = on_device(b);
  staged->broadcast_bytes(db.data(), 8, 1);
  world->broadcast(b.data(), 2, 1);
  EXPECT_EQ(from_device<int32_t>(db), b);
  EXPECT_EQ(b[0], 42);

  // A ring, blocking and not (the pipeline's pattern): each rank sends to the next.
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  std::vector<float> mine = {float(r), float(r) + 0.5f}, got(2, -1.0f), got2(2, -1.0f);
  DeviceBuffer dmine = on_device(mine), dgot = on_device(got), dgot2 = on_device(got2);
  Request sent = staged->isend_bytes(dmine.data(), 8, next, 5);
  staged->recv_bytes(dgot.data(), 8, prev, 5);
  sent->wait();
  Request receiving = staged->irecv_bytes(dgot2.data(), 8, next, 6);
  staged->send_bytes(dmine.data(), 8, prev, 6);
  receiving->wait();
  EXPECT_EQ(from_device<float>(dgot), (std::vector<float>{float(prev), float(prev) + 0.5f}));
  EXPECT_EQ(from_device<float>(dgot2), (std::vector<float>{float(next), float(next) + 0.5f}));
}

TEST_F(StagedCommTest, SplitGroupsStageToo) {
  const int r = world->rank();
  std::unique_ptr<Comm> half = staged->split(r % 2, r);
  std::vector<float> v = {float(r)};
  DeviceBuffer dv = on_device(v);
  half->all_reduce_sum(dv.as<float>(), 1);
  float expect = 0.0f;
  for (int i = r % 2; i < world->size(); i += 2) expect += float(i);
  EXPECT_EQ(from_device<float>(dv)[0], expect);
  EXPECT_GT(static_cast<StagedComm&>(*half).staged_bytes(), 0);
}

TEST_F(StagedCommTest, AsTheDeviceTwinOfACheckedGroupItIsNumbered) {
  // The trainer's layout: a checked host group with a staged twin; the twin's calls are the
  // group's collectives, numbered and recorded like the host ones.
  CheckedComm checked(make_world_comm(), 0.0, "test");
  checked.attach_device(std::make_unique<StagedComm>(checked, reference_backend()));
  ASSERT_TRUE(checked.has_device_twin());
  std::vector<float> v = {1.0f, 2.0f};
  DeviceBuffer dv = on_device(v);
  checked.device().all_reduce_sum(dv.as<float>(), 2);
  checked.all_reduce_sum(v.data(), 2);
  EXPECT_EQ(from_device<float>(dv), v);
  int64_t calls = 0;
  for (const auto& [key, total] : checked.collective_totals()) calls += total.calls;
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace mt::parallel
