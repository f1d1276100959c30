// Device twins, one per distinct rank set (parallel/device_comms.h), on the ranks mpirun started:
// for several meshes of the world, the twins made are exactly the non-empty sets of the axes of
// size > 1 (2^k - 1 for k such axes, where one per group made 32), groups with the same ranks share
// one twin and groups with other ranks do not, single-rank groups get the local twin, and a sum
// through every group's twin (host-staged, on the reference backend's memory) is that group's sum.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "backend/device_buffer.h"
#include "backend/reference_backend.h"
#include "parallel/checked_comm.h"
#include "parallel/device_comms.h"
#include "parallel/staged_comm.h"

namespace mt::parallel {
namespace {

std::vector<std::string> meshes_for(int world) {
  if (world == 8) return {"dp=8", "dp=2,fsdp=2,tp=2", "pp=2,tp=4", "fsdp=2,cp=2,tp=2"};
  if (world == 4) return {"dp=4", "fsdp=2,tp=2", "pp=2,cp=2"};
  return {"dp=" + std::to_string(world)};
}

// The axes of size > 1 among `set`: what names a group's ranks.
AxisSet sized_axes(const MeshShape& m, AxisSet set) {
  AxisSet out = 0;
  for (Axis a : kAxes)
    if ((set & axis_bit(a)) && m.size(a) > 1) out |= axis_bit(a);
  return out;
}

TEST(DeviceTwins, OnePerDistinctRankSetSharedByTheGroupsThatHoldIt) {
  ASSERT_TRUE(launched_with_mpi()) << "run under mpirun";
  auto world = make_world_comm();
  Backend& dev = reference_backend();
  for (const std::string& text : meshes_for(world->size())) {
    SCOPED_TRACE(text);
    const MeshShape shape = MeshShape::parse(text);
    Mesh mesh(*world, shape);
    int k = 0;
    for (Axis a : kAxes) k += shape.size(a) > 1;
    std::vector<Comm*> made_over;
    const int made = attach_device_twins(mesh, dev, [&](Comm& group) {
      made_over.push_back(&group);
      return std::make_unique<StagedComm>(group, dev);
    });
    EXPECT_EQ(made, (1 << k) - 1);
    EXPECT_EQ(int(made_over.size()), made);

    const std::vector<Comm*> groups = mesh.all_groups();
    ASSERT_EQ(groups.size(), size_t(1) << kNumAxes);  // the world, then every non-empty set of axes
    auto set_of = [](size_t i) { return i == 0 ? AxisSet((1u << kNumAxes) - 1) : AxisSet(i); };
    for (size_t i = 0; i < groups.size(); ++i) {
      Comm& gi = *groups[i];
      ASSERT_TRUE(gi.has_device_twin());
      EXPECT_EQ(gi.device().size(), gi.size());
      EXPECT_EQ(gi.device().rank(), gi.rank());
      for (size_t j = 0; j < groups.size(); ++j) {
        const bool same_ranks = sized_axes(shape, set_of(i)) == sized_axes(shape, set_of(j));
        EXPECT_EQ(&gi.device() == &groups[j]->device(), same_ranks) << "groups " << i << " and " << j;
      }
      // A sum of the world ranks through the twin, on device memory, is the host group's sum.
      int64_t host = world->rank();
      gi.all_reduce_sum(&host, 1);
      const std::vector<float> mine = {float(world->rank())};
      DeviceBuffer b(dev, DType::f32, 1);
      dev.copy_from_host(b.tensor(), mine.data());
      gi.device().all_reduce_sum(b.as<float>(), 1);
      float got = 0.0f;
      dev.copy_to_host(&got, b.tensor());
      EXPECT_EQ(got, float(host)) << "group " << i;
    }
    // What attach_device_comms says for the run's log, over the same counting.
    Mesh again(*world, shape);
    EXPECT_NE(attach_device_comms(again, dev, DeviceCommKind::staged)
                  .find(std::to_string(made) + (made == 1 ? " communicator" : " communicators") +
                        " for the mesh's " + std::to_string(size_t(1) << kNumAxes) + " groups"),
              std::string::npos);
  }
}

TEST(DeviceTwins, ASharedTwinOfCheckedGroupsIsNumberedOnce) {
  // The trainer's layout: checked groups; two groups with the same ranks (dp+fsdp and fsdp when
  // dp = 1) share a twin whose calls are the first group's collectives, in one sequence.
  ASSERT_TRUE(launched_with_mpi()) << "run under mpirun";
  CheckedComm world(make_world_comm(), 0.0, "test");
  if (world.size() % 2) GTEST_SKIP() << "needs an even world";
  const MeshShape shape = MeshShape::parse("fsdp=2,tp=" + std::to_string(world.size() / 2));
  Mesh mesh(world, shape);
  attach_device_comms(mesh, reference_backend(), DeviceCommKind::staged);
  Comm& fsdp = mesh.axis(Axis::fsdp);
  Comm& dp_fsdp = mesh.group(axis_bit(Axis::dp) | axis_bit(Axis::fsdp));
  ASSERT_EQ(&fsdp.device(), &dp_fsdp.device());
  world.reset_collective_totals();
  DeviceBuffer b(reference_backend(), DType::f32, 2);
  fsdp.device().all_reduce_sum(b.as<float>(), 2);
  dp_fsdp.device().all_reduce_sum(b.as<float>(), 2);
  int64_t calls = 0;
  for (const auto& [key, total] : world.collective_totals()) {
    EXPECT_EQ(key.first, "fsdp");
    calls += total.calls;
  }
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace mt::parallel
