// Debug mode of the collectives (parallel/checked_comm.h) on the ranks mpirun started: a rank
// that calls a different collective, or the same one with another count, is named on every rank
// with the group and sequence number, where plain MPI would hang or fail with MPI_ERR_TRUNCATE.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "parallel/checked_comm.h"

namespace mt::parallel {
namespace {

struct CheckedCommTest : ::testing::Test {
  void SetUp() override {
    ASSERT_TRUE(launched_with_mpi()) << "run under mpirun";
    world = std::make_unique<CheckedComm>(make_world_comm(), /*timeout_s=*/0, "test");
    world->check_signatures(true);
  }
  // The error the call throws ("" when none).
  template <class F>
  static std::string error_of(F&& call) {
    try {
      call();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  std::unique_ptr<CheckedComm> world;
};

TEST_F(CheckedCommTest, MatchingCollectivesPassAndGiveTheirValues) {
  std::vector<float> v = {1.0f, 2.0f};
  world->all_reduce_sum(v.data(), 2);
  EXPECT_EQ(v[1], 2.0f * float(world->size()));
  std::vector<uint16_t> all(size_t(world->size()));
  const uint16_t mine = uint16_t(world->rank());
  auto req = world->iall_gather_bytes(&mine, all.data(), 1, 2);
  req->wait();
  for (int i = 0; i < world->size(); ++i) EXPECT_EQ(all[size_t(i)], i);
}

TEST_F(CheckedCommTest, SendsAndReceivesPassBesideSignatureChecks) {
  // A ring: each rank sends to the next and receives from the previous, blocking and not. Only
  // two ranks take part in each message, so the signature checks (collectives of the whole group)
  // must leave them alone, and the collectives' numbering must not move.
  const int n = world->size(), me = world->rank();
  std::vector<float> out = {float(me), float(me) + 0.5f}, in(2, -1.0f), in2(2, -1.0f);
  auto sent = world->isend_bytes(out.data(), 8, (me + 1) % n, 7);
  world->recv_bytes(in.data(), 8, (me + n - 1) % n, 7);
  sent->wait();
  EXPECT_EQ(in[0], float((me + n - 1) % n));
  auto got = world->irecv_bytes(in2.data(), 8, (me + 1) % n, 9);
  world->send_bytes(out.data(), 8, (me + n - 1) % n, 9);
  got->wait();
  EXPECT_EQ(in2[1], float((me + 1) % n) + 0.5f);
  std::vector<float> v = {1.0f};
  world->all_reduce_sum(v.data(), 1);  // still in step with every rank
  EXPECT_EQ(v[0], float(n));
}

TEST_F(CheckedCommTest, DifferentCountIsNamedOnEveryRank) {
  world->barrier();  // #1
  std::vector<float> v(4, 1.0f);
  const int64_t n = world->rank() == 1 ? 4 : 3;
  const std::string e = error_of([&] { world->all_reduce_sum(v.data(), n); });
  EXPECT_NE(e.find("collectives out of step on group world: rank 0 of world calls all_reduce_sum "
                   "#2 (f32 x 3, 12 bytes), rank 1 calls all_reduce_sum #2 (f32 x 4, 16 bytes)"),
            std::string::npos)
      << e;
  // Nothing was sent: the group is still usable, in step.
  world->all_reduce_sum(v.data(), 1);
  EXPECT_EQ(v[0], float(world->size()));
}

TEST_F(CheckedCommTest, DifferentOpAndExtraCollectiveAreNamed) {
  std::vector<double> d(2, 1.0);
  const std::string e = error_of([&] {
    if (world->rank() == 0) world->broadcast(d.data(), 2, 0);
    else world->all_reduce_sum(d.data(), 2);
  });
  EXPECT_NE(e.find("rank 0 of world calls broadcast #1 (1-byte x 16, 16 bytes, root 0), rank 1 "
                   "calls all_reduce_sum #1 (f64 x 2, 16 bytes)"), std::string::npos) << e;
  if (world->size() > 4) {
    EXPECT_NE(e.find("and " + std::to_string(world->size() - 4) + " more ranks differ"),
              std::string::npos) << e;
  }
  // A rank that makes one collective more than the others is caught at that collective.
  const std::string extra = error_of([&] {
    if (world->rank() == 1) world->all_reduce_sum(d.data(), 1);
    world->barrier();
  });
  EXPECT_NE(extra.find("rank 0 of world calls barrier #2, rank 1 calls all_reduce_sum #2 (f64 x 1, "
                       "8 bytes)"), std::string::npos) << extra;
}

TEST_F(CheckedCommTest, MismatchInASplitGroupNamesTheGroup) {
  auto half = world->split(world->rank() % 2, world->rank());
  half->set_name("half");
  std::vector<float> in(8, 1.0f), out(4);
  const int64_t n = half->rank() == 1 ? 2 : 1;
  const std::string e = error_of([&] { half->reduce_scatter_sum(in.data(), out.data(), n); });
  EXPECT_NE(e.find("on group half: rank 0 of half calls reduce_scatter_sum #1 (f32 x 1, 4 bytes), "
                   "rank 1 calls reduce_scatter_sum #1 (f32 x 2, 8 bytes)"), std::string::npos) << e;
}

}  // namespace
}  // namespace mt::parallel
