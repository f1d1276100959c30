#include "parallel/mpi_comm.h"

#include <climits>
#include <cstring>
#include <functional>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "core/memory_stats.h"
#include "parallel/launch_env.h"
#include "parallel/mpi_progress.h"

namespace mt::parallel {
namespace {

int count(int64_t n, const char* what) {
  if (n < 0 || n > INT_MAX)
    fail(std::string(what) + ": " + std::to_string(n) +
         " elements exceed MPI's int count; split the buffer");
  return int(n);
}

// Byte-typed gathers need a datatype of elem_bytes so counts stay in elements (fewer overflows).
MPI_Datatype element_type(int elem_bytes) {
  switch (elem_bytes) {
    case 1: return MPI_BYTE;
    case 2: return MPI_UINT16_T;
    case 4: return MPI_FLOAT;
    case 8: return MPI_DOUBLE;
    default: fail("all_gather: unsupported element size " + std::to_string(elem_bytes));
  }
}

// A request handed to the progress engine (mpi_progress.h), which issues and moves it until it is
// waited for; with the staged input of a non-blocking all-reduce, given back to its pool then.
class MpiRequest final : public CommRequest {
 public:
  MpiRequest(std::shared_ptr<MpiProgress::Pending> pending, std::shared_ptr<MpiComm::Staged> staged)
      : pending_(std::move(pending)), staged_(std::move(staged)) {}
  ~MpiRequest() override {
    try {
      wait();
    } catch (...) {  // never throw here: the error was or will be seen by an explicit wait
    }
  }
  void wait() override {
    MpiProgress::instance().wait(*pending_);
    if (staged_ && staged_->buffer) staged_->pool->give(std::move(staged_->buffer), staged_->n);
  }

 private:
  std::shared_ptr<MpiProgress::Pending> pending_;
  std::shared_ptr<MpiComm::Staged> staged_;
};

// MPI_Init exactly once per process, MPI_Finalize at exit (after every MpiComm is gone: the world
// communicators returned by make_world_comm are owned by callers whose lifetimes end before exit).
void ensure_mpi_initialised() {
  int inited = 0;
  MPI_Initialized(&inited);
  if (inited) return;
  // MULTIPLE: the progress engine's thread tests requests while the main thread issues and waits
  // (mpi_progress.h), and the CUDA-on-CPU build's NCCL (kernels/cuda_on_cpu/nccl.h) makes its MPI
  // calls on the worker threads of the emulated streams. An MPI that gives less still runs,
  // without the thread (set_comm_progress refuses it), except under that build.
  int provided = 0;
  check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
#if defined(MESHTRAIN_CUDA_ON_CPU)
  if (provided < MPI_THREAD_MULTIPLE)
    fail("MPI_Init_thread: this MPI provides thread level " + std::to_string(provided) +
         ", but the CUDA-on-CPU build's NCCL needs MPI_THREAD_MULTIPLE (" +
         std::to_string(MPI_THREAD_MULTIPLE) + ")");
#endif
  std::atexit([] {
    MpiProgress::instance().stop();  // its thread makes MPI calls
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  });
}

}  // namespace

std::unique_ptr<float[]> MpiComm::StagingPool::take(int64_t n, int64_t& capacity) {
  std::lock_guard<std::mutex> lock(mutex);
  for (size_t i = 0; i < free.size(); ++i)
    if (free[i].second >= n) {
      std::unique_ptr<float[]> b = std::move(free[i].first);
      capacity = free[i].second;
      free.erase(free.begin() + ptrdiff_t(i));
      return b;
    }
  memory_stats::add(size_t(n) * sizeof(float));  // counted as the tensors are: the planner prices it
  capacity = n;
  return std::unique_ptr<float[]>(new float[size_t(n)]);
}

MpiComm::StagingPool::~StagingPool() {
  for (const auto& [buffer, n] : free) memory_stats::sub(size_t(n) * sizeof(float));
}

void MpiComm::drain() { MpiProgress::instance().drain(queued_); }

void MpiComm::StagingPool::give(std::unique_ptr<float[]> buffer, int64_t n) {
  std::lock_guard<std::mutex> lock(mutex);
  free.emplace_back(std::move(buffer), n);
}

MpiComm::MpiComm(MPI_Comm comm) : comm_(comm), staging_(std::make_shared<StagingPool>()) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

MpiComm::~MpiComm() {
  drain();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_WORLD && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void MpiComm::barrier() {
  drain();
  check_mpi(MPI_Barrier(comm_), "MPI_Barrier");
}

void MpiComm::all_reduce_sum(float* data, int64_t n) {
  drain();
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, data, count(n, "all_reduce"), MPI_FLOAT, MPI_SUM, comm_),
        "MPI_Allreduce");
}

void MpiComm::all_reduce_sum(double* data, int64_t n) {
  drain();
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, data, count(n, "all_reduce"), MPI_DOUBLE, MPI_SUM, comm_),
        "MPI_Allreduce");
}

void MpiComm::all_reduce_sum(int64_t* data, int64_t n) {
  drain();
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, data, count(n, "all_reduce"), MPI_INT64_T, MPI_SUM, comm_),
        "MPI_Allreduce");
}

void MpiComm::all_reduce_max(float* data, int64_t n) {
  drain();
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, data, count(n, "all_reduce"), MPI_FLOAT, MPI_MAX, comm_),
        "MPI_Allreduce");
}

void MpiComm::all_gather_bytes(const void* in, void* out, int64_t n, int elem_bytes) {
  drain();
  MPI_Datatype t = element_type(elem_bytes);
  const bool in_place = in == static_cast<const char*>(out) + int64_t(rank_) * n * elem_bytes;
  int c = count(n, "all_gather");
  check_mpi(MPI_Allgather(in_place ? MPI_IN_PLACE : in, c, t, out, c, t, comm_), "MPI_Allgather");
}

void MpiComm::reduce_scatter_sum(const float* in, float* out, int64_t n) {
  drain();
  check_mpi(MPI_Reduce_scatter_block(in, out, count(n, "reduce_scatter"), MPI_FLOAT, MPI_SUM, comm_),
        "MPI_Reduce_scatter_block");
}

void MpiComm::broadcast_bytes(void* data, int64_t bytes, int root) {
  drain();
  check_mpi(MPI_Bcast(data, count(bytes, "broadcast"), MPI_BYTE, root, comm_), "MPI_Bcast");
}

Request MpiComm::start(std::function<MPI_Request()> issue, std::shared_ptr<Staged> staged) {
  return std::make_unique<MpiRequest>(MpiProgress::instance().start(std::move(issue), queued_), std::move(staged));
}

Request MpiComm::iall_gather_bytes(const void* in, void* out, int64_t n, int elem_bytes) {
  const MPI_Datatype t = element_type(elem_bytes);
  const bool in_place = in == static_cast<const char*>(out) + int64_t(rank_) * n * elem_bytes;
  const int c = count(n, "all_gather");
  return start([=, comm = comm_] {
    MPI_Request r;
    check_mpi(MPI_Iallgather(in_place ? MPI_IN_PLACE : in, c, t, out, c, t, comm, &r), "MPI_Iallgather");
    return r;
  });
}

// Open MPI's MPI_Iallreduce in place allocates a temporary copy of the whole buffer at every call
// and copies into it before returning (9-20 ms for 25 MB measured here, page faults included).
// Staging the input in a reused buffer of this group's and reducing into `data` costs one copy and
// no allocation (and under the thread mode the copy is the communication thread's).
Request MpiComm::iall_reduce_sum(float* data, int64_t n) {
  const int c = count(n, "all_reduce");
  auto staged = std::make_shared<Staged>();
  staged->pool = staging_;
  return start(
      [=, comm = comm_] {
        staged->buffer = staged->pool->take(n, staged->n);
        std::memcpy(staged->buffer.get(), data, size_t(n) * sizeof(float));
        MPI_Request r;
        check_mpi(MPI_Iallreduce(staged->buffer.get(), data, c, MPI_FLOAT, MPI_SUM, comm, &r), "MPI_Iallreduce");
        return r;
      },
      staged);
}

Request MpiComm::ireduce_scatter_sum(const float* in, float* out, int64_t n) {
  const int c = count(n, "reduce_scatter");
  return start([=, comm = comm_] {
    MPI_Request r;
    check_mpi(MPI_Ireduce_scatter_block(in, out, c, MPI_FLOAT, MPI_SUM, comm, &r), "MPI_Ireduce_scatter_block");
    return r;
  });
}

void MpiComm::send_bytes(const void* data, int64_t bytes, int peer, int tag) {
  drain();
  check_mpi(MPI_Send(data, count(bytes, "send"), MPI_BYTE, peer, tag, comm_), "MPI_Send");
}

void MpiComm::recv_bytes(void* data, int64_t bytes, int peer, int tag) {
  drain();
  check_mpi(MPI_Recv(data, count(bytes, "recv"), MPI_BYTE, peer, tag, comm_, MPI_STATUS_IGNORE), "MPI_Recv");
}

Request MpiComm::isend_bytes(const void* data, int64_t bytes, int peer, int tag) {
  const int c = count(bytes, "send");
  return start([=, comm = comm_] {
    MPI_Request r;
    check_mpi(MPI_Isend(data, c, MPI_BYTE, peer, tag, comm, &r), "MPI_Isend");
    return r;
  });
}

Request MpiComm::irecv_bytes(void* data, int64_t bytes, int peer, int tag) {
  const int c = count(bytes, "recv");
  return start([=, comm = comm_] {
    MPI_Request r;
    check_mpi(MPI_Irecv(data, c, MPI_BYTE, peer, tag, comm, &r), "MPI_Irecv");
    return r;
  });
}

std::unique_ptr<Comm> MpiComm::split(int color, int key) {
  drain();
  MPI_Comm sub;
  check_mpi(MPI_Comm_split(comm_, color, key, &sub), "MPI_Comm_split");
  return std::make_unique<MpiComm>(sub);
}

void MpiComm::abort(int code) {
  MPI_Abort(comm_, code);
  std::exit(code);  // MPI_Abort does not return in practice; this keeps [[noreturn]] honest
}

bool launched_with_mpi() {
  if (read_launch_env().launcher != Launcher::none) return true;
  for (const char* var : {"PMI_SIZE", "PMIX_RANK"})  // other launchers MPI can join
    if (std::getenv(var)) return true;
  const char* forced = std::getenv("MESHTRAIN_MPI");
  return forced && std::string(forced) == "1";
}

int64_t ranks_on_this_host() {
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"})
    if (const char* v = std::getenv(var)) {
      char* end = nullptr;
      const long long n = std::strtoll(v, &end, 10);
      if (end != v && *end == '\0' && n > 0) return n;
    }
  return 1;
}

void abort_world_after_error(int code) {
  int initialised = 0, finalised = 0;
  MPI_Initialized(&initialised);
  MPI_Finalized(&finalised);
  if (initialised && !finalised) {
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size > 1) MPI_Abort(MPI_COMM_WORLD, code);
  }
}

std::string world_rank_label() {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised) return "";
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size > 1 ? "rank " + std::to_string(rank) + "/" + std::to_string(size) : "";
}

std::unique_ptr<Comm> make_world_comm() {
  if (!launched_with_mpi()) return std::make_unique<LocalComm>();
  const LaunchEnv env = read_launch_env();
  ensure_mpi_initialised();
  auto world = std::make_unique<MpiComm>(MPI_COMM_WORLD);
  check_launch_matches(env, world->rank(), world->size());
  return world;
}

}  // namespace mt::parallel
