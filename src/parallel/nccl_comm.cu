// NcclComm: see nccl_comm.h for how it orders its calls against the backend's stream.
#include "parallel/nccl_comm.h"

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "kernels/cuda/nccl_runtime.h"

namespace mt::parallel {
namespace {

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail(std::string("NCCL comm: ") + what + ": " + cudaGetErrorString(e));
}

void check_nccl(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) fail(std::string("NCCL comm: ") + what + ": " + ncclGetErrorString(r));
}

// A CUDA event owned once, shared by every request of one issued group.
class StreamEvent {
 public:
  explicit StreamEvent(cudaStream_t recorded_on) {
    check_cuda(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "cudaEventCreate");
    check_cuda(cudaEventRecord(event_, recorded_on), "cudaEventRecord");
  }
  ~StreamEvent() { cudaEventDestroy(event_); }
  StreamEvent(const StreamEvent&) = delete;
  StreamEvent& operator=(const StreamEvent&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// What a request waits for: filled in when its call is issued (at once for collectives, at the
// next flush for queued sends and receives).
struct Issued {
  std::shared_ptr<StreamEvent> done;
};

class NcclComm;

class NcclRequest final : public CommRequest {
 public:
  NcclRequest(NcclComm& comm, std::shared_ptr<Issued> issued) : comm_(comm), issued_(std::move(issued)) {}
  ~NcclRequest() override {
    try {
      wait();
    } catch (...) {  // a destructor must not throw; wait() reports the error when called
    }
  }
  void wait() override;

 private:
  NcclComm& comm_;
  std::shared_ptr<Issued> issued_;
  bool done_ = false;
};

class NcclComm final : public Comm {
 public:
  NcclComm(Comm& host, std::unique_ptr<Comm> owned_host, Backend& backend)
      : owned_host_(std::move(owned_host)), host_(host), backend_(backend),
        compute_(static_cast<cudaStream_t>(backend.native_stream())) {
    set_name(host.name());
    if (!compute_) fail(std::string("NCCL comm: the ") + backend.name() + " backend has no device stream");
    check_cuda(cudaSetDevice(backend.device().index), "cudaSetDevice");
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    ncclUniqueId id{};
    if (host_.rank() == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    host_.broadcast_bytes(&id, int64_t(sizeof(id)), 0);
    check_nccl(ncclCommInitRank(&comm_, host_.size(), id, host_.rank()), "ncclCommInitRank");
  }
  ~NcclComm() override {
    try {
      flush();
    } catch (...) {
    }
    cudaStreamSynchronize(stream_);
    ncclCommDestroy(comm_);
    cudaStreamDestroy(stream_);
  }
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int rank() const override { return host_.rank(); }
  int size() const override { return host_.size(); }

  void barrier() override {
    flush();
    check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    backend_.synchronize();
    host_.barrier();
  }

  void all_reduce_sum(float* data, int64_t n) override { all_reduce(data, n, ncclFloat32, ncclSum); }
  void all_reduce_sum(double* data, int64_t n) override { all_reduce(data, n, ncclFloat64, ncclSum); }
  void all_reduce_sum(int64_t* data, int64_t n) override { all_reduce(data, n, ncclInt64, ncclSum); }
  void all_reduce_max(float* data, int64_t n) override { all_reduce(data, n, ncclFloat32, ncclMax); }

  void all_gather_bytes(const void* in, void* out, int64_t n, int elem_bytes) override {
    iall_gather_bytes(in, out, n, elem_bytes)->wait();
  }
  void reduce_scatter_sum(const float* in, float* out, int64_t n) override {
    ireduce_scatter_sum(in, out, n)->wait();
  }
  void broadcast_bytes(void* data, int64_t bytes, int root) override {
    collective([&] {
      check_nccl(ncclBroadcast(data, data, size_t(bytes), ncclUint8, root, comm_, stream_), "ncclBroadcast");
    })->wait();
  }
  Request iall_gather_bytes(const void* in, void* out, int64_t n, int elem_bytes) override {
    // In place when `in` is this rank's block of `out`, which NCCL supports as such.
    return collective([&] {
      check_nccl(ncclAllGather(in, out, size_t(n) * size_t(elem_bytes), ncclUint8, comm_, stream_),
                 "ncclAllGather");
    });
  }
  Request iall_reduce_sum(float* data, int64_t n) override {
    return collective([&] {
      check_nccl(ncclAllReduce(data, data, size_t(n), ncclFloat32, ncclSum, comm_, stream_), "ncclAllReduce");
    });
  }
  Request ireduce_scatter_sum(const float* in, float* out, int64_t n) override {
    return collective([&] {
      check_nccl(ncclReduceScatter(in, out, size_t(n), ncclFloat32, ncclSum, comm_, stream_),
                 "ncclReduceScatter");
    });
  }

  void send_bytes(const void* data, int64_t bytes, int peer, int tag) override {
    isend_bytes(data, bytes, peer, tag)->wait();
  }
  void recv_bytes(void* data, int64_t bytes, int peer, int tag) override {
    irecv_bytes(data, bytes, peer, tag)->wait();
  }
  Request isend_bytes(const void* data, int64_t bytes, int peer, int) override {
    return queue(true, const_cast<void*>(data), bytes, peer);
  }
  Request irecv_bytes(void* data, int64_t bytes, int peer, int) override {
    return queue(false, data, bytes, peer);
  }

  std::unique_ptr<Comm> split(int color, int key) override {
    std::unique_ptr<Comm> sub = host_.split(color, key);
    Comm& sub_host = *sub;
    return std::make_unique<NcclComm>(sub_host, std::move(sub), backend_);
  }

  [[noreturn]] void abort(int code) override {
    ncclCommAbort(comm_);
    host_.abort(code);
    std::abort();  // not reached: GCC does not see [[noreturn]] through the virtual call
  }

  // Issues the queued sends and receives as one group.
  void flush() {
    if (pending_.empty()) return;
    std::vector<Pending> group = std::move(pending_);
    pending_.clear();
    after_compute();
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    for (const Pending& p : group) {
      if (p.send) check_nccl(ncclSend(p.data, size_t(p.bytes), ncclUint8, p.peer, comm_, stream_), "ncclSend");
      else check_nccl(ncclRecv(p.data, size_t(p.bytes), ncclUint8, p.peer, comm_, stream_), "ncclRecv");
    }
    check_nccl(ncclGroupEnd(), "ncclGroupEnd");
    auto done = std::make_shared<StreamEvent>(stream_);
    for (const Pending& p : group) p.issued->done = done;
  }

  // The backend's stream goes on only after `issued` (no host wait).
  void order_compute_after(const Issued& issued) {
    check_cuda(cudaStreamWaitEvent(compute_, issued.done->get(), 0), "cudaStreamWaitEvent");
  }

 private:
  struct Pending {
    bool send;
    void* data;
    int64_t bytes;
    int peer;
    std::shared_ptr<Issued> issued;
  };

  // The communication stream goes on only after what the backend's stream has been given so far.
  void after_compute() {
    StreamEvent compute_so_far(compute_);
    check_cuda(cudaStreamWaitEvent(stream_, compute_so_far.get(), 0), "cudaStreamWaitEvent");
  }

  template <class Issue>
  Request collective(Issue&& issue) {
    flush();  // calls are issued in the order they were made
    after_compute();
    issue();
    auto issued = std::make_shared<Issued>();
    issued->done = std::make_shared<StreamEvent>(stream_);
    return std::make_unique<NcclRequest>(*this, std::move(issued));
  }

  void all_reduce(void* data, int64_t n, ncclDataType_t type, ncclRedOp_t op) {
    collective([&] {
      check_nccl(ncclAllReduce(data, data, size_t(n), type, op, comm_, stream_), "ncclAllReduce");
    })->wait();
  }

  Request queue(bool send, void* data, int64_t bytes, int peer) {
    auto issued = std::make_shared<Issued>();
    pending_.push_back({send, data, bytes, peer, issued});
    return std::make_unique<NcclRequest>(*this, std::move(issued));
  }

  std::unique_ptr<Comm> owned_host_;  // set when split made this group
  Comm& host_;
  Backend& backend_;
  cudaStream_t compute_;
  cudaStream_t stream_ = nullptr;
  ncclComm_t comm_ = nullptr;
  std::vector<Pending> pending_;
};

void NcclRequest::wait() {
  if (done_) return;
  if (!issued_->done) comm_.flush();  // a queued send or receive: issue it with its group now
  comm_.order_compute_after(*issued_);
  done_ = true;
}

}  // namespace

std::unique_ptr<Comm> make_nccl_comm(Comm& host, Backend& backend) {
  return std::make_unique<NcclComm>(host, nullptr, backend);
}

}  // namespace mt::parallel
