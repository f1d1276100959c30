// Emulated NCCL operations (nccl.h): argument checks at the call, groups, and the work each
// communicator's calls become on their stream: MPI through host bounce buffers, on the stream's
// worker thread, in the communicator's issue order. Communicators themselves: nccl_init.cpp.
#if defined(MESHTRAIN_CUDA_ON_CPU)

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstring>
#include <deque>
#include <thread>
#include <vector>

#include "kernels/cuda_on_cpu/nccl_comm_state.h"
#include "kernels/cuda_on_cpu/streams.h"
#include "kernels/device_math/bf16_round.h"

namespace mt::cuda_on_cpu::nccl {
namespace {

constexpr int kP2pTag = 7;  // on the communicator's own MPI communicator

enum class Kind { all_reduce, all_gather, reduce_scatter, broadcast, send, recv };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::all_reduce: return "ncclAllReduce";
    case Kind::all_gather: return "ncclAllGather";
    case Kind::reduce_scatter: return "ncclReduceScatter";
    case Kind::broadcast: return "ncclBroadcast";
    case Kind::send: return "ncclSend";
    case Kind::recv: return "ncclRecv";
  }
  return "NCCL";
}

struct Op {
  Kind kind;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;  // elements: per rank for all-gather (send) and reduce-scatter (receive)
  ncclDataType_t type = ncclUint8;
  ncclRedOp_t op = ncclSum;
  int root_or_peer = 0;
};

size_t type_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

// An operation stopped because its communicator was aborted.
struct Aborted {};

// Waits for MPI requests, giving the cores away meanwhile (ranks are oversubscribed on small
// machines), and stops when the communicator is aborted.
void wait_all(CommState& s, std::vector<MPI_Request>& requests) {
  for (int round = 0;; ++round) {
    int done = 0;
    MPI_Testall(int(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE);
    if (done) return;
    if (s.aborted.load()) throw Aborted{};
    if (round < 64) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(round < 1024 ? 20 : 200));
  }
}

void wait_one(CommState& s, MPI_Request& request) {
  std::vector<MPI_Request> one{request};
  wait_all(s, one);
  request = one[0];
}

// Device memory is read and written only here, on the stream's worker; MPI sees host copies
// (another thread's MPI progress may copy a message, and device memory is the worker's alone).
std::vector<unsigned char> read_device(const void* p, size_t bytes, const char* what, const char* name) {
  if (bytes > 0 && !is_device_range(p, bytes))
    fault(std::string(what) + ": " + name + " (" + std::to_string(bytes) +
          " bytes) is not inside one device allocation");
  std::vector<unsigned char> host(bytes);
  if (bytes > 0) std::memcpy(host.data(), p, bytes);
  return host;
}

void check_writable(void* p, size_t bytes, const char* what, const char* name) {
  if (bytes > 0 && !is_device_range(p, bytes))
    fault(std::string(what) + ": " + name + " (" + std::to_string(bytes) +
          " bytes) is not inside one device allocation");
}

// ---- reductions, in rank order, in the element type --------------------------------------------
template <class T>
T apply(ncclRedOp_t op, T a, T b) {
  switch (op) {
    case ncclProd: return T(a * b);
    case ncclMax: return std::max(a, b);
    case ncclMin: return std::min(a, b);
    default: return T(a + b);  // ncclSum, ncclAvg
  }
}

template <class T>
void reduce_typed(unsigned char* out, const unsigned char* blocks, int n, size_t count, ncclRedOp_t op) {
  const size_t block = count * sizeof(T);
  for (size_t i = 0; i < count; ++i) {
    T acc;
    std::memcpy(&acc, blocks + i * sizeof(T), sizeof(T));
    for (int r = 1; r < n; ++r) {
      T x;
      std::memcpy(&x, blocks + size_t(r) * block + i * sizeof(T), sizeof(T));
      acc = apply(op, acc, x);
    }
    if (op == ncclAvg) acc = T(acc / T(n));
    std::memcpy(out + i * sizeof(T), &acc, sizeof(T));
  }
}

// IEEE half <-> f32 (round to nearest even), for ncclFloat16 reductions.
float half_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) return (sign ? -1.0f : 1.0f) * std::ldexp(float(mant), -24);  // zero, subnormal
  if (exp == 31) return mt::dm::bits_float(sign | 0x7f800000u | (mant << 13));  // inf, NaN
  return mt::dm::bits_float(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t f32_to_half(float f) {
  const uint32_t bits = mt::dm::float_bits(f);
  const uint16_t sign = uint16_t((bits >> 16) & 0x8000u);
  const uint32_t x = bits & 0x7fffffffu;
  if (x >= 0x7f800000u) return uint16_t(sign | (x > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (x >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds past 65504: infinity
  if (x < 0x38800000u)  // below 2^-14: a subnormal half (scaling by 2^24 is exact)
    return uint16_t(sign | uint16_t(std::nearbyint(mt::dm::bits_float(x) * 16777216.0f)));
  uint32_t h = ((x >> 23) - 112) << 10 | ((x >> 13) & 0x3ffu);
  const uint32_t rest = x & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry moves into the exponent
  return uint16_t(sign | h);
}

// f16 and bf16 are reduced in f32 and rounded back after every step, as NCCL's kernels add them.
void reduce_16(unsigned char* out, const unsigned char* blocks, int n, size_t count, ncclRedOp_t op,
               float (*widen)(uint16_t), uint16_t (*narrow)(float)) {
  auto at = [&](int r, size_t i) {
    uint16_t b;
    std::memcpy(&b, blocks + size_t(r) * count * 2 + i * 2, 2);
    return widen(b);
  };
  for (size_t i = 0; i < count; ++i) {
    float acc = at(0, i);
    for (int r = 1; r < n; ++r) acc = widen(narrow(apply(op, acc, at(r, i))));
    if (op == ncclAvg) acc = acc / float(n);
    const uint16_t b = narrow(acc);
    std::memcpy(out + i * 2, &b, 2);
  }
}

// out[count] = op over the n blocks of `count` elements each.
void reduce(unsigned char* out, const unsigned char* blocks, int n, size_t count, ncclDataType_t t,
            ncclRedOp_t op) {
  switch (t) {
    case ncclInt8: return reduce_typed<int8_t>(out, blocks, n, count, op);
    case ncclUint8: return reduce_typed<uint8_t>(out, blocks, n, count, op);
    case ncclInt32: return reduce_typed<int32_t>(out, blocks, n, count, op);
    case ncclUint32: return reduce_typed<uint32_t>(out, blocks, n, count, op);
    case ncclInt64: return reduce_typed<int64_t>(out, blocks, n, count, op);
    case ncclUint64: return reduce_typed<uint64_t>(out, blocks, n, count, op);
    case ncclFloat32: return reduce_typed<float>(out, blocks, n, count, op);
    case ncclFloat64: return reduce_typed<double>(out, blocks, n, count, op);
    case ncclBfloat16: return reduce_16(out, blocks, n, count, op, mt::dm::bf16_bits_to_f32, mt::dm::f32_to_bf16_bits);
    case ncclFloat16: return reduce_16(out, blocks, n, count, op, half_to_f32, f32_to_half);
    default: fault("NCCL: reduction of an unknown type");  // refused at the call
  }
}

// ---- the exchanges (one rank: no MPI) -------------------------------------------------------------
std::vector<unsigned char> all_gather_bytes(CommState& s, const std::vector<unsigned char>& mine) {
  std::vector<unsigned char> all(mine.size() * size_t(s.size));
  if (s.size == 1) return mine;
  MPI_Request r;
  MPI_Iallgather(mine.data(), int(mine.size()), MPI_BYTE, all.data(), int(mine.size()), MPI_BYTE,
                 s.mpi, &r);
  wait_one(s, r);
  return all;
}

void run_collective(CommState& s, const Op& op) {
  const char* what = kind_name(op.kind);
  const size_t es = type_size(op.type), bytes = op.count * es, n = size_t(s.size);
  switch (op.kind) {
    case Kind::all_reduce: {
      const auto mine = read_device(op.send, bytes, what, "sendbuff");
      check_writable(op.recv, bytes, what, "recvbuff");
      const auto all = all_gather_bytes(s, mine);
      std::vector<unsigned char> out(bytes);
      reduce(out.data(), all.data(), s.size, op.count, op.type, op.op);
      if (bytes) std::memcpy(op.recv, out.data(), bytes);
      return;
    }
    case Kind::all_gather: {
      const auto mine = read_device(op.send, bytes, what, "sendbuff");
      check_writable(op.recv, bytes * n, what, "recvbuff");
      const auto all = all_gather_bytes(s, mine);
      if (!all.empty()) std::memcpy(op.recv, all.data(), all.size());
      return;
    }
    case Kind::reduce_scatter: {
      const auto mine = read_device(op.send, bytes * n, what, "sendbuff");
      check_writable(op.recv, bytes, what, "recvbuff");
      std::vector<unsigned char> blocks(bytes * n);  // every rank's block for this rank
      if (s.size == 1) {
        blocks = mine;
      } else {
        MPI_Request r;
        MPI_Ialltoall(mine.data(), int(bytes), MPI_BYTE, blocks.data(), int(bytes), MPI_BYTE, s.mpi, &r);
        wait_one(s, r);
      }
      std::vector<unsigned char> out(bytes);
      reduce(out.data(), blocks.data(), s.size, op.count, op.type, op.op);
      if (bytes) std::memcpy(op.recv, out.data(), bytes);
      return;
    }
    case Kind::broadcast: {
      std::vector<unsigned char> data =
          s.rank == op.root_or_peer ? read_device(op.send, bytes, what, "sendbuff")
                                    : std::vector<unsigned char>(bytes);
      check_writable(op.recv, bytes, what, "recvbuff");
      if (s.size > 1) {
        MPI_Request r;
        MPI_Ibcast(data.data(), int(bytes), MPI_BYTE, op.root_or_peer, s.mpi, &r);
        wait_one(s, r);
      }
      if (bytes) std::memcpy(op.recv, data.data(), bytes);
      return;
    }
    default: return;
  }
}

// Sends and receives of one group: every send posted, then the receives matched in call order per
// peer (a probe gives the matching send's size, which must equal the receive's), then all waited
// for. Messages to this rank itself pair up in call order inside the group.
void run_p2p(CommState& s, const std::vector<Op>& ops) {
  std::vector<std::vector<unsigned char>> outgoing;
  std::deque<std::vector<unsigned char>> to_self;
  std::vector<MPI_Request> requests;
  outgoing.reserve(ops.size());
  for (const Op& op : ops) {
    if (op.kind != Kind::send) continue;
    outgoing.push_back(read_device(op.send, op.count * type_size(op.type), "ncclSend", "sendbuff"));
    if (op.root_or_peer == s.rank) {
      to_self.push_back(outgoing.back());
      continue;
    }
    requests.emplace_back();
    MPI_Isend(outgoing.back().data(), int(outgoing.back().size()), MPI_BYTE, op.root_or_peer, kP2pTag,
              s.mpi, &requests.back());
  }
  struct Incoming {
    const Op* op;
    std::vector<unsigned char> data;
    size_t sent = 0;
  };
  std::vector<Incoming> incoming;
  incoming.reserve(ops.size());
  std::string mismatch;
  for (const Op& op : ops) {
    if (op.kind != Kind::recv) continue;
    const size_t expected = op.count * type_size(op.type);
    check_writable(op.recv, expected, "ncclRecv", "recvbuff");
    Incoming in{&op, {}, 0};
    if (op.root_or_peer == s.rank) {
      if (to_self.empty()) {
        mismatch = "an ncclRecv from rank " + std::to_string(s.rank) +
                   " itself with no ncclSend to itself in its group (NCCL would hang)";
        continue;
      }
      in.data = std::move(to_self.front());
      to_self.pop_front();
    } else {
      MPI_Message message;
      MPI_Status status;
      for (int round = 0;; ++round) {
        int found = 0;
        MPI_Improbe(op.root_or_peer, kP2pTag, s.mpi, &found, &message, &status);
        if (found) break;
        if (s.aborted.load()) throw Aborted{};
        if (round < 64) std::this_thread::yield();
        else std::this_thread::sleep_for(std::chrono::microseconds(round < 1024 ? 20 : 200));
      }
      int got = 0;
      MPI_Get_count(&status, MPI_BYTE, &got);
      in.data.resize(size_t(got));
      requests.emplace_back();
      MPI_Imrecv(in.data.data(), got, MPI_BYTE, &message, &requests.back());
    }
    in.sent = in.data.size();
    if (in.sent != expected && mismatch.empty())
      mismatch = "an ncclRecv of " + std::to_string(expected) + " bytes from rank " +
                 std::to_string(op.root_or_peer) + " matched an ncclSend of " +
                 std::to_string(in.sent) +
                 " bytes (NCCL matches the sends and receives between two ranks in call order; "
                 "it would hang or corrupt memory)";
    incoming.push_back(std::move(in));
  }
  wait_all(s, requests);
  if (!mismatch.empty()) fault(mismatch);  // after every request completed: MPI stays usable
  for (const Incoming& in : incoming)
    if (!in.data.empty()) std::memcpy(in.op->recv, in.data.data(), in.data.size());
}

// One communicator's calls of one group (or a single call), as the work of its stream.
void run_batch(const std::shared_ptr<CommState>& state, const std::vector<Op>& ops, uint64_t ticket) {
  CommState& s = *state;
  struct Finish {
    CommState& s;
    uint64_t ticket;
    ~Finish() { s.finish(ticket); }
  } finish{s, ticket};
  if (!s.wait_turn(ticket)) return;
  try {
    std::vector<Op> p2p;
    for (const Op& op : ops)
      if (op.kind == Kind::send || op.kind == Kind::recv) p2p.push_back(op);
      else run_collective(s, op);
    if (!p2p.empty()) run_p2p(s, p2p);
  } catch (const Aborted&) {
    // ncclCommAbort: the operation ends unfinished, as NCCL's kernels do.
  }
}

// ---- issuing -------------------------------------------------------------------------------------
struct Pending {
  std::shared_ptr<CommState> state;
  cudaStream_t stream;
  Op op;
};
thread_local int group_depth = 0;
thread_local std::vector<Pending> group_ops;

ncclResult_t issue(const std::shared_ptr<CommState>& state, cudaStream_t stream, std::vector<Op> ops) {
  const uint64_t ticket = state->take_ticket();
  std::string what = ops.size() == 1 ? kind_name(ops[0].kind) : "NCCL group";
  // The ticket is finished however the work ends, even when the runtime drops it unrun.
  struct Token {
    Token(std::shared_ptr<CommState> s, uint64_t t) : state(std::move(s)), ticket(t) {}
    Token(const Token&) = delete;
    Token& operator=(const Token&) = delete;
    ~Token() {
      if (!ran) state->finish(ticket);
    }
    std::shared_ptr<CommState> state;
    uint64_t ticket;
    bool ran = false;
  };
  auto token = std::make_shared<Token>(state, ticket);
  const cudaError_t e = enqueue(
      stream, std::move(what),
      [token, ops = std::move(ops)] {
        token->ran = true;
        run_batch(token->state, ops, token->ticket);
      },
      Release::now);
  if (e != cudaSuccess) return refuse(ncclUnhandledCudaError, std::string("the stream's device has faulted: ") + cudaGetErrorString(e));
  return ncclSuccess;
}

ncclResult_t submit(ncclComm_t comm, cudaStream_t stream, const Op& op) {
  if (group_depth > 0) {
    group_ops.push_back({comm->state, stream, op});
    return ncclSuccess;
  }
  return issue(comm->state, stream, {op});
}

ncclResult_t check_common(const char* what, ncclComm_t comm, ncclDataType_t type, size_t count,
                          size_t bytes_per_rank_factor) {
  if (!comm) return refuse(ncclInvalidArgument, std::string(what) + ": null communicator");
  if (comm->state->aborted.load()) return refuse(ncclInvalidUsage, std::string(what) + ": aborted communicator");
  if (type_size(type) == 0) return refuse(ncclInvalidArgument, std::string(what) + ": unknown data type");
  // MPI counts are ints: the emulation moves at most 2 GiB per message (tiny shapes only).
  if (count * type_size(type) * bytes_per_rank_factor > size_t(INT_MAX))
    return refuse(ncclInvalidArgument, std::string(what) + ": over 2 GiB in one call (not emulated)");
  return ncclSuccess;
}

ncclResult_t check_op(const char* what, ncclRedOp_t op) {
  if (op < ncclSum || op >= ncclNumOps) return refuse(ncclInvalidArgument, std::string(what) + ": unknown reduction");
  return ncclSuccess;
}

}  // namespace
}  // namespace mt::cuda_on_cpu::nccl

using namespace mt::cuda_on_cpu::nccl;

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t type,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  if (ncclResult_t r = check_common("ncclAllReduce", comm, type, count, size_t(comm ? comm->state->size : 1))) return r;
  if (ncclResult_t r = check_op("ncclAllReduce", op)) return r;
  if (count > 0 && (!sendbuff || !recvbuff)) return refuse(ncclInvalidArgument, "ncclAllReduce: null buffer");
  return submit(comm, stream, {Kind::all_reduce, sendbuff, recvbuff, count, type, op, 0});
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t type,
                           int root, ncclComm_t comm, cudaStream_t stream) {
  if (ncclResult_t r = check_common("ncclBroadcast", comm, type, count, 1)) return r;
  if (root < 0 || root >= comm->state->size)
    return refuse(ncclInvalidArgument, "ncclBroadcast: root " + std::to_string(root) + " of " +
                                           std::to_string(comm->state->size) + " ranks");
  if (count > 0 && (!recvbuff || (comm->state->rank == root && !sendbuff)))
    return refuse(ncclInvalidArgument, "ncclBroadcast: null buffer");
  return submit(comm, stream, {Kind::broadcast, sendbuff, recvbuff, count, type, ncclSum, root});
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  if (ncclResult_t r = check_common("ncclReduceScatter", comm, type, recvcount, size_t(comm ? comm->state->size : 1))) return r;
  if (ncclResult_t r = check_op("ncclReduceScatter", op)) return r;
  if (recvcount > 0 && (!sendbuff || !recvbuff)) return refuse(ncclInvalidArgument, "ncclReduceScatter: null buffer");
  return submit(comm, stream, {Kind::reduce_scatter, sendbuff, recvbuff, recvcount, type, op, 0});
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t type,
                           ncclComm_t comm, cudaStream_t stream) {
  if (ncclResult_t r = check_common("ncclAllGather", comm, type, sendcount, size_t(comm ? comm->state->size : 1))) return r;
  if (sendcount > 0 && (!sendbuff || !recvbuff)) return refuse(ncclInvalidArgument, "ncclAllGather: null buffer");
  return submit(comm, stream, {Kind::all_gather, sendbuff, recvbuff, sendcount, type, ncclSum, 0});
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  if (ncclResult_t r = check_common("ncclSend", comm, type, count, 1)) return r;
  if (peer < 0 || peer >= comm->state->size)
    return refuse(ncclInvalidArgument, "ncclSend: peer " + std::to_string(peer) + " of " +
                                           std::to_string(comm->state->size) + " ranks");
  if (count > 0 && !sendbuff) return refuse(ncclInvalidArgument, "ncclSend: null buffer");
  return submit(comm, stream, {Kind::send, sendbuff, nullptr, count, type, ncclSum, peer});
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  if (ncclResult_t r = check_common("ncclRecv", comm, type, count, 1)) return r;
  if (peer < 0 || peer >= comm->state->size)
    return refuse(ncclInvalidArgument, "ncclRecv: peer " + std::to_string(peer) + " of " +
                                           std::to_string(comm->state->size) + " ranks");
  if (count > 0 && !recvbuff) return refuse(ncclInvalidArgument, "ncclRecv: null buffer");
  return submit(comm, stream, {Kind::recv, nullptr, recvbuff, count, type, ncclSum, peer});
}

ncclResult_t ncclGroupStart() {
  ++group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (group_depth == 0) return refuse(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--group_depth > 0) return ncclSuccess;
  std::vector<Pending> ops = std::move(group_ops);
  group_ops.clear();
  // One work per communicator, in the order each first appeared, on the stream of its calls.
  std::vector<std::shared_ptr<CommState>> comms;
  for (const Pending& p : ops)
    if (std::find(comms.begin(), comms.end(), p.state) == comms.end()) comms.push_back(p.state);
  for (const auto& c : comms) {
    cudaStream_t stream = nullptr;
    bool first = true;
    for (const Pending& p : ops)
      if (p.state == c) {
        if (!first && p.stream != stream)
          return refuse(ncclInvalidUsage, "ncclGroupEnd: one communicator's calls in a group on two "
                                          "streams (not emulated)");
        stream = p.stream, first = false;
      }
  }
  for (const auto& c : comms) {
    std::vector<Op> batch;
    cudaStream_t stream = nullptr;
    for (const Pending& p : ops)
      if (p.state == c) batch.push_back(p.op), stream = p.stream;
    if (ncclResult_t r = issue(c, stream, std::move(batch))) return r;
  }
  return ncclSuccess;
}

#endif  // MESHTRAIN_CUDA_ON_CPU
