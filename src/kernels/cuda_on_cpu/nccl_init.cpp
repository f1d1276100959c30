// Emulated NCCL communicators (nccl.h): unique ids, the rendezvous of ncclCommInitRank over MPI,
// destroy, abort and the queries. The operations are in nccl.cpp.
#if defined(MESHTRAIN_CUDA_ON_CPU)

#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "kernels/cuda_on_cpu/nccl_comm_state.h"
#include "kernels/cuda_on_cpu/streams.h"

namespace mt::cuda_on_cpu::nccl {

namespace {

thread_local std::string last_error;

// What an id carries: a nonce that names the communicator being made, and the MPI_COMM_WORLD
// rank of the process that made it, which every member meets.
constexpr uint64_t kIdMagic = 0x64694c43434e746dull;  // "mtNCCLid"
struct IdContents {
  uint64_t magic;
  uint64_t nonce;
  int32_t root_world_rank;
};
static_assert(sizeof(IdContents) <= NCCL_UNIQUE_ID_BYTES);

// Reserved tags on MPI_COMM_WORLD for the rendezvous (the project's own tags are small numbers;
// MPI guarantees tags up to 32767).
constexpr int kHelloTag = 32760, kReplyTag = 32761, kCreateTag = 32762;

// A member's hello to the id's maker.
struct Hello {
  uint64_t nonce;
  int32_t nranks, rank, world_rank, device;
  char host[256];
};

// Hellos of another communicator's rendezvous that the maker received while meeting this one's
// members (two rendezvous with one maker may overlap when their members start at different times).
std::mutex stash_mutex;
std::vector<Hello> stash;

std::string hostname() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

int world_rank() {
  int inited = 0, rank = 0;
  MPI_Initialized(&inited);
  if (inited) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

// The maker's side: every member's hello (its own included), or a refusal.
// `joined` gets the world rank of every other process that said hello, all of which are answered.
ncclResult_t gather_members(const IdContents& id, const Hello& own, std::vector<Hello>& members,
                            std::vector<int32_t>& joined) {
  members.assign(size_t(own.nranks), Hello{});
  std::vector<bool> seen(size_t(own.nranks), false);
  int have = 0;
  ncclResult_t status = ncclSuccess;
  auto take = [&](const Hello& h) {
    if (h.world_rank != own.world_rank) joined.push_back(h.world_rank);
    if (h.nranks != own.nranks || h.rank < 0 || h.rank >= own.nranks || seen[size_t(h.rank)]) {
      status = refuse(ncclInvalidArgument,
                      "ncclCommInitRank: world rank " + std::to_string(h.world_rank) + " joined as rank " +
                          std::to_string(h.rank) + " of " + std::to_string(h.nranks) +
                          ", which does not fit a communicator of " + std::to_string(own.nranks) +
                          " ranks (or that rank was taken)");
      ++have;
      return;
    }
    seen[size_t(h.rank)] = true;
    members[size_t(h.rank)] = h;
    ++have;
  };
  take(own);
  {
    std::lock_guard<std::mutex> lock(stash_mutex);
    for (auto it = stash.begin(); it != stash.end();)
      if (it->nonce == id.nonce) take(*it), it = stash.erase(it);
      else ++it;
  }
  while (have < own.nranks) {
    Hello h{};
    MPI_Recv(&h, int(sizeof h), MPI_BYTE, MPI_ANY_SOURCE, kHelloTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (h.nonce == id.nonce) {
      take(h);
    } else {
      std::lock_guard<std::mutex> lock(stash_mutex);
      stash.push_back(h);
    }
  }
  if (status != ncclSuccess) return status;
  // NCCL's rule: one rank per device (per host) in a communicator.
  for (int a = 0; a < own.nranks; ++a)
    for (int b = a + 1; b < own.nranks; ++b)
      if (members[size_t(a)].device == members[size_t(b)].device &&
          std::strcmp(members[size_t(a)].host, members[size_t(b)].host) == 0)
        return refuse(ncclInvalidUsage, "ncclCommInitRank: duplicate GPU detected: rank " +
                                            std::to_string(a) + " and rank " + std::to_string(b) +
                                            " both on CUDA device " +
                                            std::to_string(members[size_t(a)].device) + " of host " +
                                            members[size_t(a)].host);
  return ncclSuccess;
}

}  // namespace

ncclResult_t refuse(ncclResult_t r, const std::string& why) {
  last_error = why;
  std::fprintf(stderr, "NCCL (CUDA on CPU) %s: %s\n", ncclGetErrorString(r), why.c_str());
  return r;
}

}  // namespace mt::cuda_on_cpu::nccl

using namespace mt::cuda_on_cpu::nccl;

const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t) { return last_error.c_str(); }

ncclResult_t ncclGetVersion(int* version) {
  if (!version) return ncclInvalidArgument;
  *version = 22700;  // the API level emulated: NCCL 2.27's names and values
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* out) {
  if (!out) return refuse(ncclInvalidArgument, "ncclGetUniqueId: null id");
  std::memset(out, 0, sizeof *out);
  std::random_device rd;
  IdContents id{kIdMagic, uint64_t(rd()) << 32 ^ rd() ^
                              uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()),
                world_rank()};
  std::memcpy(out->internal, &id, sizeof id);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId unique_id, int rank) {
  if (!comm) return refuse(ncclInvalidArgument, "ncclCommInitRank: null comm");
  *comm = nullptr;
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return refuse(ncclInvalidArgument, "ncclCommInitRank: rank " + std::to_string(rank) + " of " +
                                           std::to_string(nranks));
  IdContents id;
  std::memcpy(&id, unique_id.internal, sizeof id);
  if (id.magic != kIdMagic)
    return refuse(ncclInvalidArgument, "ncclCommInitRank: the id was not made by ncclGetUniqueId");
  auto state = std::make_shared<CommState>();
  state->rank = rank, state->size = nranks, state->device = mt::cuda_on_cpu::current_device();
  if (nranks == 1) {
    *comm = new ncclComm{state};
    return ncclSuccess;
  }
  int inited = 0, provided = 0;
  MPI_Initialized(&inited);
  if (!inited)
    return refuse(ncclSystemError, "ncclCommInitRank: " + std::to_string(nranks) +
                                       " ranks need MPI (one process per rank, under mpirun), "
                                       "which is not initialised");
  MPI_Query_thread(&provided);
  if (provided < MPI_THREAD_MULTIPLE)
    return refuse(ncclInvalidUsage,
                  "ncclCommInitRank: the emulated NCCL makes MPI calls on stream worker threads, "
                  "so MPI must be initialised with MPI_THREAD_MULTIPLE (it provides level " +
                      std::to_string(provided) + ")");
  Hello own{};
  own.nonce = id.nonce, own.nranks = nranks, own.rank = rank, own.world_rank = world_rank();
  own.device = state->device;
  std::strncpy(own.host, hostname().c_str(), sizeof own.host - 1);

  // The member list, ordered by communicator rank, with the maker's verdict first.
  std::vector<int32_t> reply(size_t(nranks) + 3);
  if (own.world_rank == id.root_world_rank) {
    std::vector<Hello> members;
    std::vector<int32_t> joined;
    const ncclResult_t status = gather_members(id, own, members, joined);
    reply[0] = status;
    std::memcpy(&reply[1], &id.nonce, sizeof id.nonce);
    for (int r = 0; r < nranks; ++r) reply[size_t(r) + 3] = members[size_t(r)].world_rank;
    for (int32_t w : joined)
      MPI_Send(reply.data(), int(reply.size()), MPI_INT32_T, w, kReplyTag, MPI_COMM_WORLD);
    if (status != ncclSuccess) return status;
  } else {
    MPI_Send(&own, int(sizeof own), MPI_BYTE, id.root_world_rank, kHelloTag, MPI_COMM_WORLD);
    MPI_Recv(reply.data(), int(reply.size()), MPI_INT32_T, id.root_world_rank, kReplyTag,
             MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    uint64_t nonce = 0;
    std::memcpy(&nonce, &reply[1], sizeof nonce);
    if (nonce != id.nonce) return refuse(ncclInternalError, "ncclCommInitRank: a reply for another communicator");
    if (reply[0] != ncclSuccess)
      return refuse(ncclResult_t(reply[0]), "ncclCommInitRank: refused by the rank that made the id "
                                            "(world rank " + std::to_string(id.root_world_rank) +
                                                "; its stderr says why)");
  }
  MPI_Group world_group, group;
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  MPI_Group_incl(world_group, nranks, reply.data() + 3, &group);
  const int made = MPI_Comm_create_group(MPI_COMM_WORLD, group, kCreateTag, &state->mpi);
  MPI_Group_free(&group);
  MPI_Group_free(&world_group);
  if (made != MPI_SUCCESS || state->mpi == MPI_COMM_NULL)
    return refuse(ncclSystemError, "ncclCommInitRank: MPI_Comm_create_group failed");
  int mpi_rank = -1;
  MPI_Comm_rank(state->mpi, &mpi_rank);
  if (mpi_rank != rank) return refuse(ncclInternalError, "ncclCommInitRank: rank order lost");
  *comm = new ncclComm{state};
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm) return ncclSuccess;  // NCCL accepts a null communicator here
  CommState& s = *comm->state;
  {  // NCCL finishes the communicator's queued operations first
    std::unique_lock<std::mutex> lock(s.m);
    s.cv.wait(lock, [&] { return s.outstanding == 0 || s.aborted.load(); });
  }
  if (s.mpi != MPI_COMM_NULL && !s.aborted.load()) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&s.mpi);
  }
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (!comm) return ncclSuccess;
  // Never waits: operations waiting for their turn or for a peer see the flag and stop. The MPI
  // communicator is left to the process's end (freeing it could wait for a stuck peer).
  comm->state->aborted = true;
  comm->state->cv.notify_all();
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (!comm || !count) return ncclInvalidArgument;
  *count = comm->state->size;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (!comm || !rank) return ncclInvalidArgument;
  *rank = comm->state->rank;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  if (!comm || !device) return ncclInvalidArgument;
  *device = comm->state->device;
  return ncclSuccess;
}

#endif  // MESHTRAIN_CUDA_ON_CPU
