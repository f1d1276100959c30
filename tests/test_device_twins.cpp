// Device twins without MPI (parallel/device_comms.h): a single-rank mesh needs no communicator,
// so every one of its 64 groups gets the one single-rank twin and nothing is made; that twin moves
// device bytes only through the backend (on memory the host cannot read) and refuses a peer.
// The multi-rank counting and sharing run on real ranks: tests/mpi/test_device_twins.cpp.
#include <gtest/gtest.h>

#include <vector>

#include "backend/device_buffer.h"
#include "core/error.h"
#include "far_memory_backend.h"
#include "parallel/device_comms.h"

namespace mt::parallel {
namespace {

TEST(DeviceTwins, SingleRankMeshMakesNoCommunicator) {
  LocalComm world;
  Mesh mesh(world, MeshShape::parse("dp=1"));
  int made_calls = 0;
  const int made = attach_device_twins(mesh, cpu_backend(), [&](Comm&) -> std::unique_ptr<Comm> {
    ++made_calls;
    return nullptr;
  });
  EXPECT_EQ(made, 0);
  EXPECT_EQ(made_calls, 0);
  for (Comm* g : mesh.all_groups()) {
    ASSERT_TRUE(g->has_device_twin());
    EXPECT_EQ(&g->device(), &world.device());  // one twin for all
    EXPECT_EQ(g->device().size(), 1);
    EXPECT_EQ(g->device().rank(), 0);
  }
  Mesh again(world, MeshShape::parse("dp=1"));
  EXPECT_NE(attach_device_comms(again, cpu_backend(), DeviceCommKind::staged).find("0 communicators"),
            std::string::npos);
}

TEST(DeviceTwins, SingleRankTwinCopiesThroughTheBackend) {
  testing::FarMemoryBackend far;  // a host read of its memory is a crash
  LocalComm host;
  auto twin = make_single_rank_device_comm(host, far);
  std::vector<float> v = {1.5f, -2.0f, 3.25f, 4.0f}, out(4, 0.0f);
  DeviceBuffer a(far, DType::f32, 4), b(far, DType::f32, 4);
  far.copy_from_host(a.tensor(), v.data());
  twin->all_reduce_sum(a.as<float>(), 4);  // nothing to add
  twin->all_gather_bytes(a.data(), b.data(), 4, 4);
  far.copy_to_host(out.data(), b.tensor());
  EXPECT_EQ(out, v);
  far.fill(b.tensor(), 0.0f);
  twin->iall_gather_bytes(a.data(), b.data(), 8, 2)->wait();  // bf16 elements
  far.copy_to_host(out.data(), b.tensor());
  EXPECT_EQ(out, v);
  far.fill(b.tensor(), 0.0f);
  twin->ireduce_scatter_sum(a.as<float>(), b.as<float>(), 4)->wait();
  far.copy_to_host(out.data(), b.tensor());
  EXPECT_EQ(out, v);
  twin->all_gather_bytes(a.data(), a.data(), 4, 4);  // in place: nothing moves
  twin->broadcast_bytes(a.data(), 16, 0);
  EXPECT_THROW(twin->send_bytes(a.data(), 16, 1, 0), Error);
  EXPECT_THROW(twin->broadcast_bytes(a.data(), 16, 1), Error);
}

}  // namespace
}  // namespace mt::parallel
