// The CUDA-on-CPU build's NCCL (src/kernels/cuda_on_cpu/nccl.h), emulated over MPI, on the ranks
// mpirun started, against MPI's own answers on the same values: every collective over the world
// and over a sub-communicator (in place and not), sends and receives grouped around a ring, a
// receive whose size differs from its send faulting on the receiver's device, two ranks on one
// device refused, and an abort that releases a receive nobody will answer. Skipped unless the
// build is MESHTRAIN_CUDA_ON_CPU. Each rank takes the emulated device of its world rank (the
// ranks share a host, and NCCL allows one rank per device).
#include <gtest/gtest.h>

#if !defined(MESHTRAIN_CUDA_ON_CPU)

TEST(CudaOnCpuNccl, NeedTheCudaOnCpuBuild) {
  GTEST_SKIP() << "built without MESHTRAIN_CUDA_ON_CPU (configure with -DMESHTRAIN_CUDA_ON_CPU=ON)";
}

#else

#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cuda/nccl_runtime.h"
#include "kernels/device_math/bf16_round.h"

namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

template <class T>
struct Device {
  T* p = nullptr;
  size_t n = 0;
  explicit Device(size_t count) : n(count) { EXPECT_EQ(cudaMalloc(&p, count * sizeof(T) + 1), cudaSuccess); }
  Device(const std::vector<T>& v) : Device(v.size()) { set(v); }
  ~Device() { cudaFree(p); }
  void set(const std::vector<T>& v) {
    ASSERT_EQ(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<T> get() const {
    std::vector<T> v(n);
    EXPECT_EQ(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }
};

// A communicator over `comm`'s ranks (rank 0 makes the id; MPI carries it), on the calling
// thread's current device.
ncclResult_t make_nccl(MPI_Comm comm, ncclComm_t* out) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  ncclUniqueId id{};
  if (rank == 0) {
    EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  }
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, comm);
  return ncclCommInitRank(out, size, id, rank);
}

class CudaOnCpuNccl : public ::testing::Test {
 protected:
  void SetUp() override {
    int devices = 0;
    ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
    if (devices < world_size())
      GTEST_SKIP() << world_size() << " ranks on one host need as many emulated devices; "
                   << devices << " (MESHTRAIN_CUDA_ON_CPU_DEVICES)";
    device_count = devices;
    ASSERT_EQ(cudaSetDevice(world_rank()), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    if (stream) cudaStreamDestroy(stream);
    cudaSetDevice(world_rank());
  }
  void sync() { ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess) << cudaGetErrorString(cudaGetLastError()); }

  // Every collective on `comm` (NCCL) against MPI's answer over `mpi` (the same ranks).
  void collectives_equal_mpi(ncclComm_t comm, MPI_Comm mpi);

  int device_count = 0;
  cudaStream_t stream = nullptr;
};

void CudaOnCpuNccl::collectives_equal_mpi(ncclComm_t comm, MPI_Comm mpi) {
  int r = 0, n = 1;
  MPI_Comm_rank(mpi, &r);
  MPI_Comm_size(mpi, &n);
  const size_t count = 5;
  // Small integers in floats: every reduction order gives the same bits.
  std::vector<float> f(count);
  std::vector<double> d(count);
  std::vector<int64_t> i64(count);
  std::vector<int32_t> i32(count);
  for (size_t k = 0; k < count; ++k) {
    f[k] = float(int(k) - 2 + 3 * r), d[k] = double(k) * 0.5 - r, i64[k] = (int64_t(1) << 40) * (r + 1) + int64_t(k);
    i32[k] = int32_t(k) * (r % 2 ? -1 : 1) + r;
  }
  const std::pair<ncclRedOp_t, MPI_Op> ops[] = {
      {ncclSum, MPI_SUM}, {ncclProd, MPI_PROD}, {ncclMax, MPI_MAX}, {ncclMin, MPI_MIN}};
  for (const auto& [nop, mop] : ops) {
    SCOPED_TRACE("reduction " + std::to_string(int(nop)));
    Device<float> df(f), dfo(count);
    Device<double> dd(d);
    Device<int32_t> di(i32);
    ASSERT_EQ(ncclAllReduce(df.p, dfo.p, count, ncclFloat32, nop, comm, stream), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(dd.p, dd.p, count, ncclFloat64, nop, comm, stream), ncclSuccess);  // in place
    ASSERT_EQ(ncclAllReduce(di.p, di.p, count, ncclInt32, nop, comm, stream), ncclSuccess);
    sync();
    std::vector<float> wf(count);
    std::vector<double> wd(count);
    std::vector<int32_t> wi(count);
    MPI_Allreduce(f.data(), wf.data(), int(count), MPI_FLOAT, mop, mpi);
    MPI_Allreduce(d.data(), wd.data(), int(count), MPI_DOUBLE, mop, mpi);
    MPI_Allreduce(i32.data(), wi.data(), int(count), MPI_INT32_T, mop, mpi);
    EXPECT_EQ(dfo.get(), wf);
    EXPECT_EQ(df.get(), f) << "the send buffer is left alone";
    EXPECT_EQ(dd.get(), wd);
    EXPECT_EQ(di.get(), wi);
  }
  {  // f16: small integers and halves, exact in half precision
    std::vector<uint16_t> h(count);
    std::vector<float> hf(count);
    for (size_t k = 0; k < count; ++k) {
      hf[k] = float(k) * 0.5f + float(r);
      h[k] = uint16_t(0x3c00u);  // 1.0, overwritten below for every k
      const int half_units = int(k) + 2 * r;  // hf[k] = half_units / 2
      // 0.5 * u as an IEEE half, built from its bits (u < 64): exponent and 10-bit mantissa.
      if (half_units == 0) h[k] = 0;
      else {
        int e = 0;
        while ((half_units >> (e + 1)) > 0) ++e;  // u in [2^e, 2^(e+1))
        h[k] = uint16_t(((e - 1 + 15) << 10) | (((half_units << 10) >> e) & 0x3ff));
      }
    }
    Device<uint16_t> dh(h);
    ASSERT_EQ(ncclAllReduce(dh.p, dh.p, count, ncclFloat16, ncclSum, comm, stream), ncclSuccess);
    sync();
    std::vector<float> want(count);
    MPI_Allreduce(hf.data(), want.data(), int(count), MPI_FLOAT, MPI_SUM, mpi);
    const std::vector<uint16_t> got = dh.get();
    for (size_t k = 0; k < count; ++k) {  // decode: all values here are normal halves or zero
      const int e = (got[k] >> 10) & 0x1f, m = got[k] & 0x3ff;
      const float v = got[k] == 0 ? 0.0f : std::ldexp(float(1024 + m), e - 25);
      EXPECT_EQ(v, want[k]) << k;
    }
  }
  {  // int64 sums, the average, and bf16 (summed through f32 in rank order)
    Device<int64_t> di(i64);
    Device<double> avg(d);
    std::vector<uint16_t> b(count);
    for (size_t k = 0; k < count; ++k) b[k] = mt::dm::f32_to_bf16_bits(f[k]);
    Device<uint16_t> db(b);
    ASSERT_EQ(ncclAllReduce(di.p, di.p, count, ncclInt64, ncclSum, comm, stream), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(avg.p, avg.p, count, ncclFloat64, ncclAvg, comm, stream), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(db.p, db.p, count, ncclBfloat16, ncclSum, comm, stream), ncclSuccess);
    sync();
    std::vector<int64_t> wi(count);
    std::vector<double> wd(count);
    std::vector<float> wf(count);
    MPI_Allreduce(i64.data(), wi.data(), int(count), MPI_INT64_T, MPI_SUM, mpi);
    MPI_Allreduce(d.data(), wd.data(), int(count), MPI_DOUBLE, MPI_SUM, mpi);
    MPI_Allreduce(f.data(), wf.data(), int(count), MPI_FLOAT, MPI_SUM, mpi);
    EXPECT_EQ(di.get(), wi);
    const std::vector<double> got_avg = avg.get();
    const std::vector<uint16_t> got_b = db.get();
    for (size_t k = 0; k < count; ++k) {
      EXPECT_DOUBLE_EQ(got_avg[k], wd[k] / n);
      EXPECT_EQ(mt::dm::bf16_bits_to_f32(got_b[k]), wf[k]);  // small integers: exact in bf16
    }
  }
  {  // all-gather, out of place and in place (the rank's block of recvbuff)
    std::vector<float> want(count * size_t(n));
    MPI_Allgather(f.data(), int(count), MPI_FLOAT, want.data(), int(count), MPI_FLOAT, mpi);
    Device<float> in(f), out(count * size_t(n)), inplace(count * size_t(n));
    std::vector<float> seeded(count * size_t(n), -7.0f);
    std::copy(f.begin(), f.end(), seeded.begin() + std::ptrdiff_t(count) * r);
    inplace.set(seeded);
    ASSERT_EQ(ncclAllGather(in.p, out.p, count, ncclFloat32, comm, stream), ncclSuccess);
    ASSERT_EQ(ncclAllGather(inplace.p + count * size_t(r), inplace.p, count, ncclFloat32, comm, stream),
              ncclSuccess);
    sync();
    EXPECT_EQ(out.get(), want);
    EXPECT_EQ(inplace.get(), want);
  }
  {  // reduce-scatter, out of place and in place (recvbuff is the rank's block of sendbuff)
    std::vector<float> all(count * size_t(n));
    for (size_t k = 0; k < all.size(); ++k) all[k] = float(int(k % 7) - r);
    std::vector<float> want(count);
    MPI_Reduce_scatter_block(all.data(), want.data(), int(count), MPI_FLOAT, MPI_SUM, mpi);
    Device<float> in(all), out(count), inplace(all);
    ASSERT_EQ(ncclReduceScatter(in.p, out.p, count, ncclFloat32, ncclSum, comm, stream), ncclSuccess);
    ASSERT_EQ(ncclReduceScatter(inplace.p, inplace.p + count * size_t(r), count, ncclFloat32, ncclSum,
                                comm, stream), ncclSuccess);
    sync();
    EXPECT_EQ(out.get(), want);
    const std::vector<float> got = inplace.get();
    EXPECT_EQ(std::vector<float>(got.begin() + std::ptrdiff_t(count) * r,
                                 got.begin() + std::ptrdiff_t(count) * (r + 1)), want);
  }
  {  // broadcast from the last rank, out of place and in place
    const int root = n - 1;
    std::vector<int32_t> want = i32;
    MPI_Bcast(want.data(), int(count), MPI_INT32_T, root, mpi);
    Device<int32_t> in(i32), out(count), inplace(i32);
    ASSERT_EQ(ncclBroadcast(in.p, out.p, count, ncclInt32, root, comm, stream), ncclSuccess);
    ASSERT_EQ(ncclBroadcast(inplace.p, inplace.p, count, ncclInt32, root, comm, stream), ncclSuccess);
    sync();
    EXPECT_EQ(out.get(), want);
    EXPECT_EQ(inplace.get(), want);
  }
}

TEST_F(CudaOnCpuNccl, CollectivesOverTheWorldEqualMpi) {
  ncclComm_t comm = nullptr;
  ASSERT_EQ(make_nccl(MPI_COMM_WORLD, &comm), ncclSuccess);
  int count = 0, rank = -1, device = -1;
  ncclCommCount(comm, &count), ncclCommUserRank(comm, &rank), ncclCommCuDevice(comm, &device);
  EXPECT_EQ(count, world_size());
  EXPECT_EQ(rank, world_rank());
  EXPECT_EQ(device, world_rank());
  collectives_equal_mpi(comm, MPI_COMM_WORLD);
  sync();
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

TEST_F(CudaOnCpuNccl, CollectivesOverSubCommunicatorsEqualMpi) {
  // Two halves (even and odd world ranks, in reverse order) made at once: two rendezvous with
  // different makers overlap on MPI_COMM_WORLD.
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, world_rank() % 2, -world_rank(), &half);
  ncclComm_t comm = nullptr;
  ASSERT_EQ(make_nccl(half, &comm), ncclSuccess);
  collectives_equal_mpi(comm, half);
  sync();
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  MPI_Comm_free(&half);
}

TEST_F(CudaOnCpuNccl, GroupedSendsAndReceivesAroundARing) {
  ncclComm_t comm = nullptr;
  ASSERT_EQ(make_nccl(MPI_COMM_WORLD, &comm), ncclSuccess);
  const int r = world_rank(), n = world_size(), next = (r + 1) % n, prev = (r + n - 1) % n;
  // Two messages of different sizes to the next rank, matched in call order; one to itself.
  std::vector<int32_t> a = {r, r * 10, r * 100}, b = {-r, 7}, self = {42 + r};
  Device<int32_t> da(a), db(b), ds(self), ra(3), rb(2), rs(1);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  // Receives before sends: inside a group the order of posting does not matter.
  ASSERT_EQ(ncclRecv(ra.p, 3, ncclInt32, prev, comm, stream), ncclSuccess);
  ASSERT_EQ(ncclRecv(rb.p, 2, ncclInt32, prev, comm, stream), ncclSuccess);
  ASSERT_EQ(ncclSend(da.p, 3, ncclInt32, next, comm, stream), ncclSuccess);
  ASSERT_EQ(ncclSend(ds.p, 1, ncclInt32, r, comm, stream), ncclSuccess);
  ASSERT_EQ(ncclRecv(rs.p, 1, ncclInt32, r, comm, stream), ncclSuccess);
  ASSERT_EQ(ncclSend(db.p, 2, ncclInt32, next, comm, stream), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  sync();
  EXPECT_EQ(ra.get(), (std::vector<int32_t>{prev, prev * 10, prev * 100}));
  EXPECT_EQ(rb.get(), (std::vector<int32_t>{-prev, 7}));
  EXPECT_EQ(rs.get(), self);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

TEST_F(CudaOnCpuNccl, ReceiveOfAnotherSizeThanItsSendFaults) {
  // On a device of its own (a device fault is sticky): each rank the next one's device.
  const int r = world_rank(), n = world_size();
  if (n % 2) GTEST_SKIP() << "pairs of ranks";
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  stream = nullptr;
  ASSERT_EQ(cudaSetDevice((r + 1) % device_count), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  ncclComm_t comm = nullptr;
  ASSERT_EQ(make_nccl(MPI_COMM_WORLD, &comm), ncclSuccess);
  const bool sender = r % 2 == 0;
  const int peer = sender ? r + 1 : r - 1;
  Device<float> buf(4);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  if (sender) {
    ASSERT_EQ(ncclSend(buf.p, 4, ncclFloat32, peer, comm, stream), ncclSuccess);
  } else {
    ASSERT_EQ(ncclRecv(buf.p, 3, ncclFloat32, peer, comm, stream), ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  const cudaError_t e = cudaStreamSynchronize(stream);
  if (sender) {
    EXPECT_EQ(e, cudaSuccess);
  } else {
    EXPECT_EQ(e, cudaErrorLaunchFailure);
    const std::string text = cudaGetErrorString(e);
    EXPECT_NE(text.find("ncclRecv of 12 bytes from rank " + std::to_string(peer) +
                        " matched an ncclSend of 16 bytes"), std::string::npos) << text;
  }
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_F(CudaOnCpuNccl, TwoRanksOnOneDeviceAreRefused) {
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ncclComm_t comm = nullptr;
  EXPECT_EQ(make_nccl(MPI_COMM_WORLD, &comm), ncclInvalidUsage);
  EXPECT_EQ(comm, nullptr);
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_F(CudaOnCpuNccl, AbortReleasesAReceiveNobodyAnswers) {
  ncclComm_t comm = nullptr;
  ASSERT_EQ(make_nccl(MPI_COMM_WORLD, &comm), ncclSuccess);
  Device<float> buf(4);
  if (world_rank() == 0) {
    ASSERT_EQ(ncclRecv(buf.p, 4, ncclFloat32, world_size() - 1, comm, stream), ncclSuccess);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);  // the receive ended with the abort
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(CudaOnCpuNcclApi, ValuesAndRefusalsAtTheCall) {
  EXPECT_EQ(int(ncclInvalidUsage), 5);
  EXPECT_EQ(int(ncclBfloat16), 9);
  EXPECT_EQ(int(ncclAvg), 4);
  EXPECT_EQ(sizeof(ncclUniqueId), 128u);
  EXPECT_STREQ(ncclGetErrorString(ncclInvalidArgument), "invalid argument");
  float x = 0;
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, nullptr, nullptr), ncclInvalidArgument);
  ncclComm_t one = nullptr;
  ncclUniqueId id{};
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ASSERT_EQ(ncclCommInitRank(&one, 1, id, 0), ncclSuccess);  // one rank: no MPI at all
  EXPECT_EQ(ncclBroadcast(&x, &x, 1, ncclFloat32, 1, one, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclSend(&x, 1, ncclFloat32, 1, one, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclRedOp_t(9), one, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclDataType_t(12), ncclSum, one, nullptr), ncclInvalidArgument);
  ncclComm_t bad = nullptr;
  EXPECT_EQ(ncclCommInitRank(&bad, 2, id, 2), ncclInvalidArgument);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
  ncclCommDestroy(one);
}

}  // namespace

#endif  // MESHTRAIN_CUDA_ON_CPU
