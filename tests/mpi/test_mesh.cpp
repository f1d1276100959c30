// The mesh's communicators on real ranks: each axis group holds exactly the ranks that differ
// along that axis, and a mesh of the wrong size is refused on every rank alike.
#include <gtest/gtest.h>

#include "core/error.h"
#include "parallel/mesh.h"

namespace mt::parallel {
namespace {

MeshShape mesh_for(int world) {
  return world == 8 ? MeshShape::parse("dp=2,fsdp=2,tp=2") : MeshShape::parse("fsdp=2,tp=2");
}

// Sum of world ranks over the group `axes` of `rank`, computed from the coordinates alone.
int64_t expected_group_sum(const MeshShape& m, int64_t rank, AxisSet axes) {
  const Coords mine = coords_of(m, rank);
  int64_t sum = 0;
  for (int64_t r = 0; r < m.world(); ++r) {
    Coords c = coords_of(m, r);
    bool same = true;
    for (Axis a : kAxes)
      if (!(axes & axis_bit(a)) && c[size_t(a)] != mine[size_t(a)]) same = false;
    if (same) sum += r;
  }
  return sum;
}

TEST(MeshMpi, CoordinatesAndAxisGroups) {
  auto world = make_world_comm();
  const MeshShape shape = mesh_for(world->size());
  Mesh mesh(*world, shape);
  const int r = world->rank();
  EXPECT_EQ(mesh.coord(Axis::tp), r % shape.tp);
  EXPECT_EQ(mesh.coord(Axis::fsdp), (r / shape.tp) % shape.fsdp);
  EXPECT_EQ(mesh.coord(Axis::dp), r / (shape.tp * shape.fsdp));
  // tp groups are adjacent ranks: an all-reduce over tp sums exactly the tp group.
  int64_t x = r;
  mesh.axis(Axis::tp).all_reduce_sum(&x, 1);
  EXPECT_EQ(x, expected_group_sum(shape, r, axis_bit(Axis::tp)));
  if (shape.tp == 2) {
    EXPECT_EQ(x, 2 * (r - r % 2) + 1);
  }
  EXPECT_EQ(mesh.axis(Axis::tp).rank(), mesh.coord(Axis::tp));
  for (AxisSet set = 1; set < (1u << kNumAxes); ++set) {
    int64_t y = r;
    mesh.group(set).all_reduce_sum(&y, 1);
    EXPECT_EQ(y, expected_group_sum(shape, r, set)) << "axis set " << set;
  }
  // The data-parallel group (dp x fsdp) ranks in row-major order over (dp, fsdp).
  Comm& dpg = mesh.data_parallel();
  EXPECT_EQ(dpg.size(), shape.dp * shape.fsdp);
  EXPECT_EQ(dpg.rank(), mesh.coord(Axis::dp) * shape.fsdp + mesh.coord(Axis::fsdp));
  EXPECT_EQ(mesh.axis(Axis::pp).size(), 1);
}

TEST(MeshMpi, ContextParallelGroups) {
  // cp sits between fsdp and tp in the rank order: 8 ranks as fsdp2 x cp2 x tp2, 4 as cp2 x tp2.
  auto world = make_world_comm();
  const MeshShape shape = MeshShape::parse(world->size() == 8 ? "fsdp=2,cp=2,tp=2" : "cp=2,tp=2");
  Mesh mesh(*world, shape);
  const int r = world->rank();
  EXPECT_EQ(mesh.coord(Axis::tp), r % 2);
  EXPECT_EQ(mesh.coord(Axis::cp), (r / 2) % 2);
  for (AxisSet set = 1; set < (1u << kNumAxes); ++set) {  // all 63 groups
    int64_t y = r;
    mesh.group(set).all_reduce_sum(&y, 1);
    EXPECT_EQ(y, expected_group_sum(shape, r, set)) << "axis set " << set;
  }
  // A cp group is the ranks two apart (the tp partners in between), ordered by cp coordinate.
  Comm& cp = mesh.axis(Axis::cp);
  EXPECT_EQ(cp.size(), 2);
  EXPECT_EQ(cp.rank(), mesh.coord(Axis::cp));
  int64_t x = r;
  cp.all_reduce_sum(&x, 1);
  EXPECT_EQ(x, 2 * (r - r % 4 + r % 2) + 2);
  // The ranks seeing different tokens: dp x fsdp x cp.
  EXPECT_EQ(mesh.token_parallel().size(), shape.dp * shape.fsdp * shape.cp);
  EXPECT_EQ(mesh.data_parallel().size(), shape.dp * shape.fsdp);
}

TEST(MeshMpi, WrongSizeIsRefusedOnEveryRank) {
  auto world = make_world_comm();
  const MeshShape bad = MeshShape::parse("dp=2,fsdp=2,tp=" + std::to_string(world->size()));
  std::string msg;
  try {
    Mesh mesh(*world, bad);
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_EQ(msg, "mesh " + bad.str() + " has " + std::to_string(bad.world()) +
                     " ranks but the world has " + std::to_string(world->size()));
  // Every rank got the error (and none is stuck in a split): they all reach this barrier.
  int64_t refused = msg.empty() ? 0 : 1;
  world->all_reduce_sum(&refused, 1);
  EXPECT_EQ(refused, world->size());
}

}  // namespace
}  // namespace mt::parallel
