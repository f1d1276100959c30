// The mesh as one process sees it: parsing, rank <-> coordinates, and the size check.
#include <gtest/gtest.h>

#include "error_of.h"
#include "core/error.h"
#include "parallel/comm.h"
#include "parallel/mesh.h"

namespace mt::parallel {
namespace {

TEST(MeshShapeParse, AxesInAnyOrderDefaultToOne) {
  MeshShape m = MeshShape::parse("tp=2,dp=2,fsdp=2");
  EXPECT_EQ(m.dp, 2);
  EXPECT_EQ(m.fsdp, 2);
  EXPECT_EQ(m.tp, 2);
  EXPECT_EQ(m.pp, 1);
  EXPECT_EQ(m.world(), 8);
  EXPECT_EQ(m.str(), "dp=2,fsdp=2,tp=2");
  EXPECT_EQ(MeshShape::parse("fsdp=8").str(), "fsdp=8");
  EXPECT_EQ(MeshShape::parse("dp=1").world(), 1);
}

TEST(MeshShapeParse, ErrorsNameTheProblem) {
  EXPECT_NE(error_of([] { MeshShape::parse("dp=2,mp=2"); }).find("unknown mesh axis 'mp'"), std::string::npos);
  EXPECT_NE(error_of([] { MeshShape::parse("dp=0"); }).find("must be positive"), std::string::npos);
  EXPECT_NE(error_of([] { MeshShape::parse("tp=-2"); }).find("must be positive"), std::string::npos);
  EXPECT_NE(error_of([] { MeshShape::parse("tp=2,tp=2"); }).find("'tp' given twice"), std::string::npos);
  EXPECT_NE(error_of([] { MeshShape::parse("tp=two"); }).find("must be an integer"), std::string::npos);
  EXPECT_NE(error_of([] { MeshShape::parse("tp"); }).find("expected axis=size"), std::string::npos);
  EXPECT_NE(error_of([] { MeshShape::parse("tp=2,"); }).find("expected axis=size"), std::string::npos);
  EXPECT_NE(error_of([] { MeshShape::parse(""); }).find("empty"), std::string::npos);
}

TEST(MeshShapeParse, WorldSizeMismatch) {
  EXPECT_EQ(error_of([] { MeshShape::parse("dp=2,fsdp=2").check_world(3); }),
            "mesh dp=2,fsdp=2 has 4 ranks but the world has 3");
  EXPECT_EQ(error_of([] { MeshShape::parse("dp=2,fsdp=2").check_world(4); }), "");
}

TEST(MeshCoords, LastAxisFastest) {
  MeshShape m = MeshShape::parse("dp=2,fsdp=2,tp=2");
  // rank = (dp*2 + fsdp)*2 + tp
  for (int64_t r = 0; r < 8; ++r) {
    Coords c = coords_of(m, r);
    EXPECT_EQ(c[size_t(Axis::tp)], r % 2);
    EXPECT_EQ(c[size_t(Axis::fsdp)], (r / 2) % 2);
    EXPECT_EQ(c[size_t(Axis::dp)], r / 4);
    EXPECT_EQ(c[size_t(Axis::pp)], 0);
    EXPECT_EQ(rank_of(m, c), r);
  }
  MeshShape p = MeshShape::parse("pp=2,tp=3");
  EXPECT_EQ(coords_of(p, 4)[size_t(Axis::pp)], 1);  // pp is outermost
  EXPECT_EQ(coords_of(p, 4)[size_t(Axis::tp)], 1);
}

TEST(MeshCoords, ContextParallelSitsBetweenFsdpAndTp) {
  MeshShape m = MeshShape::parse("cp=2,tp=2,fsdp=2");
  EXPECT_EQ(m.cp, 2);
  EXPECT_EQ(m.world(), 8);
  EXPECT_EQ(m.str(), "fsdp=2,cp=2,tp=2");  // rank order: pp, dp, fsdp, cp, tp
  // rank = (fsdp*2 + cp)*2 + tp
  for (int64_t r = 0; r < 8; ++r) {
    Coords c = coords_of(m, r);
    EXPECT_EQ(c[size_t(Axis::tp)], r % 2);
    EXPECT_EQ(c[size_t(Axis::cp)], (r / 2) % 2);
    EXPECT_EQ(c[size_t(Axis::fsdp)], r / 4);
    EXPECT_EQ(rank_of(m, c), r);
  }
  EXPECT_NE(error_of([] { MeshShape::parse("cp=2,cp=2"); }).find("'cp' given twice"), std::string::npos);
  EXPECT_NE(error_of([] { MeshShape::parse("sp=2"); }).find("expected dp, fsdp, tp, pp, cp or ep"), std::string::npos);
}

TEST(MeshCoords, ExpertParallelSitsBetweenFsdpAndCp) {
  const MeshShape m = MeshShape::parse("cp=2,ep=2,fsdp=2");
  EXPECT_EQ(m.world(), 8);
  EXPECT_EQ(m.batch_ranks(), 4);  // fsdp x ep: ep ranks see their own rows
  EXPECT_EQ(m.str(), "fsdp=2,ep=2,cp=2");  // rank order: pp, dp, fsdp, ep, cp, tp
  for (int64_t r = 0; r < 8; ++r) {  // rank = (fsdp*2 + ep)*2 + cp
    const Coords c = coords_of(m, r);
    EXPECT_EQ(c[size_t(Axis::cp)], r % 2);
    EXPECT_EQ(c[size_t(Axis::ep)], (r / 2) % 2);
    EXPECT_EQ(c[size_t(Axis::fsdp)], r / 4);
    EXPECT_EQ(rank_of(m, c), r);
  }
}

TEST(MeshCoords, AProductPastAnyMachineRoomIsRefused) {
  const std::string e = error_of([] { MeshShape::parse("dp=4294967296,fsdp=4294967296"); });
  EXPECT_NE(e.find("16777216 ranks at most"), std::string::npos) << e;
  EXPECT_NE(error_of([] { MeshShape::parse("ep=9223372036854775807"); }).find("ranks at most"), std::string::npos);
  EXPECT_EQ(MeshShape::parse("dp=4096,fsdp=4096").world(), int64_t(1) << 24);
}

TEST(MeshLocal, SingleRankMeshOverLocalComm) {
  LocalComm world;
  Mesh mesh(world, MeshShape{});
  EXPECT_EQ(mesh.rank(), 0);
  EXPECT_EQ(mesh.axis(Axis::tp).size(), 1);
  EXPECT_EQ(mesh.data_parallel().size(), 1);
  float x = 3.0f;
  mesh.axis(Axis::fsdp).all_reduce_sum(&x, 1);
  EXPECT_EQ(x, 3.0f);
  EXPECT_EQ(error_of([&] { Mesh bad(world, MeshShape::parse("tp=2")); }),
            "mesh tp=2 has 2 ranks but the world has 1");
}

TEST(MeshLocal, LocalCommCopiesAndIsNotMpiWithoutLauncher) {
  LocalComm c;
  float in[3] = {1, 2, 3}, out[3] = {};
  c.iall_gather(in, out, 3)->wait();
  EXPECT_EQ(out[2], 3.0f);
  float rs[2] = {};
  c.ireduce_scatter_sum(in, rs, 2)->wait();
  EXPECT_EQ(rs[1], 2.0f);
  // ctest runs this binary without mpirun: the world must then be the single-process one.
  if (!launched_with_mpi()) {
    EXPECT_EQ(make_world_comm()->size(), 1);
  }
}

}  // namespace
}  // namespace mt::parallel
