// Expert parallelism's two exchanges (parallel/expert_parallel.h) on real ranks: the counts each
// rank sends each other rank's experts arrive where the receiver expects them, and rows of
// uneven, partly empty sizes (one rank sending nothing, one receiving everything) arrive in rank
// order with their values, the receiver's own block left where it is; and an ep axis in the mesh sits between fsdp and cp, its ranks in the
// data-parallel and token groups.
#include <gtest/gtest.h>

#include <vector>

#include "backend/backend.h"
#include "parallel/expert_parallel.h"
#include "parallel/mesh.h"

namespace mt::parallel {
namespace {

// The rows rank `from` sends rank `to` in the test: uneven, rank 1 sending nothing at all, and
// every rank sending rank 0 the most.
int64_t rows_between(int from, int to) { return from == 1 ? 0 : (to == 0 ? 5 : 0) + (from + to) % 3; }

// Row i of what `from` sends `to`: a value that names both ends and the row.
float value_of(int from, int to, int64_t row, int64_t col) {
  return float(1000 * from + 100 * to + 10 * row + col);
}

TEST(ExpertExchangeMpi, CountsArriveWhereTheReceiverLooks) {
  auto world = make_world_comm();
  const int S = world->size(), me = world->rank();
  const int64_t L = 3;  // experts per rank
  ExpertParallelGroup ep(*world, cpu_backend());
  std::vector<int64_t> counts(static_cast<size_t>(S * L)), got(static_cast<size_t>(S * L));
  for (int p = 0; p < S; ++p)
    for (int64_t j = 0; j < L; ++j) counts[size_t(p * L + j)] = 100 * me + 10 * p + j;
  ep.exchange_counts(counts.data(), got.data(), S * L);
  for (int q = 0; q < S; ++q)
    for (int64_t j = 0; j < L; ++j) EXPECT_EQ(got[size_t(q * L + j)], 100 * q + 10 * me + j) << "from " << q;
}

TEST(ExpertExchangeMpi, UnevenRowsArriveInRankOrder) {
  auto world = make_world_comm();
  const int S = world->size(), me = world->rank();
  const int64_t C = 3;
  std::vector<int64_t> send_rows(static_cast<size_t>(S)), recv_rows(static_cast<size_t>(S));
  int64_t sent = 0, received = 0;
  for (int p = 0; p < S; ++p) {
    send_rows[size_t(p)] = rows_between(me, p), sent += send_rows[size_t(p)];
    recv_rows[size_t(p)] = rows_between(p, me), received += recv_rows[size_t(p)];
  }
  std::vector<float> send(size_t(std::max<int64_t>(sent, 1) * C)), recv(size_t(std::max<int64_t>(received, 1) * C), -1.0f);
  int64_t at = 0;
  for (int p = 0; p < S; ++p)
    for (int64_t i = 0; i < send_rows[size_t(p)]; ++i, ++at)
      for (int64_t c = 0; c < C; ++c) send[size_t(at * C + c)] = value_of(me, p, i, c);
  const Device cpu{};
  ExpertParallelGroup ep(*world, cpu_backend());
  ep.exchange_rows(Tensor(recv.data(), DType::f32, received, C, cpu), recv_rows,
                   Tensor(send.data(), DType::f32, sent, C, cpu), send_rows);
  at = 0;
  for (int q = 0; q < S; ++q)
    for (int64_t i = 0; i < recv_rows[size_t(q)]; ++i, ++at)
      for (int64_t c = 0; c < C; ++c)  // this rank's own block is not moved: the caller reads it where it is
        EXPECT_EQ(recv[size_t(at * C + c)], q == me ? -1.0f : value_of(q, me, i, c)) << "row " << i << " from " << q;
  EXPECT_EQ(at, received);
}

TEST(ExpertExchangeMpi, EpSitsBetweenFsdpAndCpAndIsDataParallel) {
  auto world = make_world_comm();
  const MeshShape shape = MeshShape::parse(world->size() == 8 ? "fsdp=2,ep=2,cp=2" : "ep=2,cp=2");
  Mesh mesh(*world, shape);
  const int r = world->rank();
  EXPECT_EQ(mesh.coord(Axis::cp), r % 2);
  EXPECT_EQ(mesh.coord(Axis::ep), r / 2 % 2);
  EXPECT_EQ(mesh.axis(Axis::ep).size(), 2);
  EXPECT_EQ(mesh.axis(Axis::ep).rank(), mesh.coord(Axis::ep));
  EXPECT_EQ(mesh.data_parallel().size(), shape.fsdp * shape.ep);
  EXPECT_EQ(mesh.token_parallel().size(), shape.fsdp * shape.ep * shape.cp);
  // Row-major over (dp, fsdp, ep): the data-parallel rank the sampler shares rows out by.
  EXPECT_EQ(mesh.data_parallel().rank(), mesh.coord(Axis::fsdp) * shape.ep + mesh.coord(Axis::ep));
}

}  // namespace
}  // namespace mt::parallel
