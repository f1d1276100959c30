#include "parallel/mpi_comm.h"

#include <climits>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "parallel/launch_env.h"

namespace mt::parallel {
namespace {

int count(int64_t n, const char* what) {
  if (n < 0 || n > INT_MAX)
    fail(std::string(what) + ": " + std::to_string(n) +
         " elements exceed MPI's int count; split the buffer");
  return int(n);
}

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  fail(std::string(what) + " failed: " + std::string(msg, size_t(len)));
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

class MpiRequest final : public CommRequest {
 public:
  explicit MpiRequest(MPI_Request r) : req_(r) {}
  ~MpiRequest() override {
    if (req_ != MPI_REQUEST_NULL) MPI_Wait(&req_, MPI_STATUS_IGNORE);  // never throw here
  }
  void wait() override {
    if (req_ != MPI_REQUEST_NULL) check(MPI_Wait(&req_, MPI_STATUS_IGNORE), "MPI_Wait");
  }

 private:
  MPI_Request req_;
};

// MPI_Init exactly once per process, MPI_Finalize at exit (after every MpiComm is gone: the world
// communicators returned by make_world_comm are owned by callers whose lifetimes end before exit).
void ensure_mpi_initialised() {
  int inited = 0;
  MPI_Initialized(&inited);
  if (inited) return;
  int provided = 0;
#if defined(MESHTRAIN_CUDA_ON_CPU)
  // The CUDA-on-CPU build's NCCL (kernels/cuda_on_cpu/nccl.h) makes its MPI calls on the worker
  // threads of the emulated streams while the main thread makes its own: MULTIPLE is required.
  check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
  if (provided < MPI_THREAD_MULTIPLE)
    fail("MPI_Init_thread: this MPI provides thread level " + std::to_string(provided) +
         ", but the CUDA-on-CPU build's NCCL needs MPI_THREAD_MULTIPLE (" +
         std::to_string(MPI_THREAD_MULTIPLE) + ")");
#else
  // FUNNELED: OpenMP threads compute, only the main thread communicates.
  check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
#endif
  std::atexit([] {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  });
}

}  // namespace

MpiComm::MpiComm(MPI_Comm comm) : comm_(comm) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

MpiComm::~MpiComm() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_WORLD && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void MpiComm::barrier() { check(MPI_Barrier(comm_), "MPI_Barrier"); }

void MpiComm::all_reduce_sum(float* data, int64_t n) {
  check(MPI_Allreduce(MPI_IN_PLACE, data, count(n, "all_reduce"), MPI_FLOAT, MPI_SUM, comm_),
        "MPI_Allreduce");
}

void MpiComm::all_reduce_sum(double* data, int64_t n) {
  check(MPI_Allreduce(MPI_IN_PLACE, data, count(n, "all_reduce"), MPI_DOUBLE, MPI_SUM, comm_),
        "MPI_Allreduce");
}

void MpiComm::all_reduce_sum(int64_t* data, int64_t n) {
  check(MPI_Allreduce(MPI_IN_PLACE, data, count(n, "all_reduce"), MPI_INT64_T, MPI_SUM, comm_),
        "MPI_Allreduce");
}

void MpiComm::all_reduce_max(float* data, int64_t n) {
  check(MPI_Allreduce(MPI_IN_PLACE, data, count(n, "all_reduce"), MPI_FLOAT, MPI_MAX, comm_),
        "MPI_Allreduce");
}

void MpiComm::all_gather_bytes(const void* in, void* out, int64_t n, int elem_bytes) {
  MPI_Datatype t = element_type(elem_bytes);
  const bool in_place = in == static_cast<const char*>(out) + int64_t(rank_) * n * elem_bytes;
  int c = count(n, "all_gather");
  check(MPI_Allgather(in_place ? MPI_IN_PLACE : in, c, t, out, c, t, comm_), "MPI_Allgather");
}

void MpiComm::reduce_scatter_sum(const float* in, float* out, int64_t n) {
  check(MPI_Reduce_scatter_block(in, out, count(n, "reduce_scatter"), MPI_FLOAT, MPI_SUM, comm_),
        "MPI_Reduce_scatter_block");
}

void MpiComm::broadcast_bytes(void* data, int64_t bytes, int root) {
  check(MPI_Bcast(data, count(bytes, "broadcast"), MPI_BYTE, root, comm_), "MPI_Bcast");
}

Request MpiComm::iall_gather_bytes(const void* in, void* out, int64_t n, int elem_bytes) {
  MPI_Datatype t = element_type(elem_bytes);
  const bool in_place = in == static_cast<const char*>(out) + int64_t(rank_) * n * elem_bytes;
  int c = count(n, "all_gather");
  MPI_Request r;
  check(MPI_Iallgather(in_place ? MPI_IN_PLACE : in, c, t, out, c, t, comm_, &r),
        "MPI_Iallgather");
  return std::make_unique<MpiRequest>(r);
}

Request MpiComm::ireduce_scatter_sum(const float* in, float* out, int64_t n) {
  MPI_Request r;
  check(MPI_Ireduce_scatter_block(in, out, count(n, "reduce_scatter"), MPI_FLOAT, MPI_SUM, comm_,
                                  &r),
        "MPI_Ireduce_scatter_block");
  return std::make_unique<MpiRequest>(r);
}

void MpiComm::send_bytes(const void* data, int64_t bytes, int peer, int tag) {
  check(MPI_Send(data, count(bytes, "send"), MPI_BYTE, peer, tag, comm_), "MPI_Send");
}

void MpiComm::recv_bytes(void* data, int64_t bytes, int peer, int tag) {
  check(MPI_Recv(data, count(bytes, "recv"), MPI_BYTE, peer, tag, comm_, MPI_STATUS_IGNORE),
        "MPI_Recv");
}

Request MpiComm::isend_bytes(const void* data, int64_t bytes, int peer, int tag) {
  MPI_Request r;
  check(MPI_Isend(data, count(bytes, "send"), MPI_BYTE, peer, tag, comm_, &r), "MPI_Isend");
  return std::make_unique<MpiRequest>(r);
}

Request MpiComm::irecv_bytes(void* data, int64_t bytes, int peer, int tag) {
  MPI_Request r;
  check(MPI_Irecv(data, count(bytes, "recv"), MPI_BYTE, peer, tag, comm_, &r), "MPI_Irecv");
  return std::make_unique<MpiRequest>(r);
}

std::unique_ptr<Comm> MpiComm::split(int color, int key) {
  MPI_Comm sub;
  check(MPI_Comm_split(comm_, color, key, &sub), "MPI_Comm_split");
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
