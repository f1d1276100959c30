// Collective communication between the ranks of one group, as the parallel layers see it. The
// interface knows nothing of MPI so that model, mesh and test code compile and run without it:
// MpiComm (mpi_comm.h) implements it over an MPI communicator, LocalComm over a single process.
//
// Buffers are counted in elements of the named type. all_gather / reduce_scatter use the rank-
// ordered layout of MPI: the full buffer holds size() blocks of n elements, block i for rank i.
// Every rank of the group must make the same calls in the same order (as with MPI itself).
//
// Host data and device data: a group's own calls take host memory (agreement checks, losses,
// counters, checkpoints). Device buffers (gradients, FSDP shards and gathers, tp partial sums,
// pipeline activations) go through device(), the same ranks' group for the backend's memory: the
// group itself while that memory is host memory (the CPU backends), else the twin a device backend
// attached (parallel/device_comms.h: StagedComm through host copies, or NcclComm).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

namespace mt::parallel {

// A pending non-blocking collective. wait() completes it (idempotent); the destructor waits too,
// so a request can never outlive the buffers it was given by accident of an early return.
class CommRequest {
 public:
  virtual ~CommRequest() = default;
  virtual void wait() = 0;
};
using Request = std::unique_ptr<CommRequest>;

// A request complete when it is issued (a one-rank group, a transport that cannot overlap).
struct CompletedRequest final : CommRequest {
  void wait() override {}
};

class Comm {
 public:
  virtual ~Comm() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void barrier() = 0;

  // In place: data[i] becomes the sum of data[i] over all ranks.
  virtual void all_reduce_sum(float* data, int64_t n) = 0;
  virtual void all_reduce_sum(double* data, int64_t n) = 0;
  virtual void all_reduce_sum(int64_t* data, int64_t n) = 0;
  // In place: data[i] becomes the maximum of data[i] over all ranks.
  virtual void all_reduce_max(float* data, int64_t n) = 0;

  // out[r*n, (r+1)*n) = rank r's `in` (n elements of elem_bytes each: any dtype, bf16 included).
  // `in` may alias its own block of `out` (in-place gather).
  virtual void all_gather_bytes(const void* in, void* out, int64_t n, int elem_bytes) = 0;
  void all_gather(const float* in, float* out, int64_t n) { all_gather_bytes(in, out, n, 4); }

  // out[0, n) = sum over ranks of their in[rank()*n, (rank()+1)*n).
  virtual void reduce_scatter_sum(const float* in, float* out, int64_t n) = 0;

  // Root's bytes are copied to every rank.
  virtual void broadcast_bytes(void* data, int64_t bytes, int root) = 0;
  template <class T>
  void broadcast(T* data, int64_t n, int root) { broadcast_bytes(data, n * int64_t(sizeof(T)), root); }

  // Non-blocking versions: the buffers must stay alive and untouched until wait().
  virtual Request iall_gather_bytes(const void* in, void* out, int64_t n, int elem_bytes) = 0;
  Request iall_gather(const float* in, float* out, int64_t n) { return iall_gather_bytes(in, out, n, 4); }
  virtual Request ireduce_scatter_sum(const float* in, float* out, int64_t n) = 0;
  // In place, like all_reduce_sum (gradient buckets). This default completes at once; groups
  // over a transport that can overlap it (MPI, NCCL) override it.
  virtual Request iall_reduce_sum(float* data, int64_t n) {
    all_reduce_sum(data, n);
    return std::make_unique<CompletedRequest>();
  }

  // Point to point (pipeline stages): `bytes` from this rank to rank `peer` of the group, matched
  // by the peer's recv with this rank and the same tag; messages between two ranks with one tag
  // arrive in the order sent. Not collective: only the two ranks take part.
  virtual void send_bytes(const void* data, int64_t bytes, int peer, int tag) = 0;
  virtual void recv_bytes(void* data, int64_t bytes, int peer, int tag) = 0;
  virtual Request isend_bytes(const void* data, int64_t bytes, int peer, int tag) = 0;
  virtual Request irecv_bytes(void* data, int64_t bytes, int peer, int tag) = 0;

  // Ranks that pass the same color form a new group, ordered by key (then by rank). Collective.
  virtual std::unique_ptr<Comm> split(int color, int key) = 0;

  // Ends every process of the job (MPI_Abort) — for an error seen by one rank only, where
  // returning would leave the others waiting forever in a collective.
  [[noreturn]] virtual void abort(int code) = 0;

  // What the group is called in diagnostics ("world", or the mesh axes it spans, "dp+fsdp"): the
  // watchdog and the collective checks (checked_comm.h) name the group a rank is stuck in.
  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  // The group over the same ranks, in the same order, that carries device buffers (see the top
  // of this file): the twin attached with attach_device, else this group.
  Comm& device() { return device_ ? *device_ : *this; }
  bool has_device_twin() const { return device_ != nullptr; }
  // Replaces the device twin (null: none). The twin goes with the last group holding it: groups
  // with the same ranks share one (parallel/device_comms.h).
  void attach_device(std::shared_ptr<Comm> twin) { device_ = std::move(twin); }

 private:
  std::string name_ = "world";
  std::shared_ptr<Comm> device_;
};

// The single-process group: every collective is a copy. Used when not launched by mpirun/srun.
class LocalComm final : public Comm {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void barrier() override {}
  void all_reduce_sum(float*, int64_t) override {}
  void all_reduce_sum(double*, int64_t) override {}
  void all_reduce_sum(int64_t*, int64_t) override {}
  void all_reduce_max(float*, int64_t) override {}
  void all_gather_bytes(const void* in, void* out, int64_t n, int elem_bytes) override;
  void reduce_scatter_sum(const float* in, float* out, int64_t n) override;
  void broadcast_bytes(void*, int64_t, int root) override;
  Request iall_gather_bytes(const void* in, void* out, int64_t n, int elem_bytes) override;
  Request ireduce_scatter_sum(const float* in, float* out, int64_t n) override;
  // A single process has no peer: every point-to-point call is a programming error.
  void send_bytes(const void*, int64_t, int peer, int) override;
  void recv_bytes(void*, int64_t, int peer, int) override;
  Request isend_bytes(const void*, int64_t, int peer, int) override;
  Request irecv_bytes(void*, int64_t, int peer, int) override;
  std::unique_ptr<Comm> split(int color, int key) override;
  [[noreturn]] void abort(int code) override;
};

// How MPI's non-blocking operations move while the ranks compute (parallel/mpi_progress.h): a
// communication thread tests them, the long compute ops test them at their start, or only the
// waits move them. Process-wide; applies to operations issued afterwards.
enum class CommProgress { off, thread, ops };
// "off", "thread" or "ops"; mt::Error otherwise.
CommProgress parse_comm_progress(const std::string& name);
const char* comm_progress_name(CommProgress mode);
// mt::Error when MPI runs and cannot give the mode what it needs (thread: MPI_THREAD_MULTIPLE).
void set_comm_progress(CommProgress mode);
// What the engine did since the process started: tests of the requests in flight, and how many
// requests completed in such a test (moved while the rank computed) or only in their wait.
struct ProgressCounters {
  int64_t polls = 0, completed_by_poll = 0, completed_in_wait = 0;
};
ProgressCounters comm_progress_counters();

// True when this process was started by a launcher that gives it a rank: mpirun/mpiexec
// (OMPI_COMM_WORLD_RANK and _SIZE, PMI_SIZE, PMIX_RANK) or srun (SLURM_PROCID and
// SLURM_STEP_NUM_TASKS, set for job steps but not for the batch script itself; see
// launch_env.h), or when MESHTRAIN_MPI=1 asks for MPI explicitly.
bool launched_with_mpi();

// The world group: an MpiComm over MPI_COMM_WORLD (initialising MPI once, finalised at exit)
// when launched_with_mpi(), else a LocalComm. An MPI world whose rank or size differs from the
// launcher's is refused (check_launch_matches). Plain `meshtrain train` never touches MPI.
std::unique_ptr<Comm> make_world_comm();

// After an error on this rank: when MPI runs with more than one rank, end the whole job
// (MPI_Abort), since the other ranks may be waiting in a collective for this one forever.
// Returns when there is nothing to abort (single process).
void abort_world_after_error(int code);
// "rank 1/4" when running under MPI with several ranks, else "" (for error messages).
std::string world_rank_label();
// How many ranks of this job the launcher started on this host (OMPI_COMM_WORLD_LOCAL_SIZE of
// Open MPI, MPI_LOCALNRANKS of MPICH's Hydra), read before MPI starts; 1 when not launched so.
// The ranks of one host share its memory.
int64_t ranks_on_this_host();

}  // namespace mt::parallel
