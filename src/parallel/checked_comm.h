// A Comm that numbers, records and (in debug mode) cross-checks every collective of the Comm it
// wraps and of every group split from it, with a watchdog over them all:
//   - each collective gets a sequence number per group (1, 2, ...) and a signature (op, element
//     type and size, count, root), kept in this rank's flight recorder (flight_recorder.h);
//   - the watchdog (watchdog.h) ends the job when this rank has been blocked in one collective
//     longer than the timeout, naming the rank, group, collective and sequence number;
//   - with signature checks on, every rank of the group first gathers every rank's signature and
//     refuses a mismatch on every rank alike ("rank 0 of dp calls all_reduce_sum #7 (f32 x 10,
//     ...), rank 1 calls all_gather #7 (...)"), where MPI would hang or fail with
//     MPI_ERR_TRUNCATE. That costs one small all-gather per collective, so it is a debug mode.
#pragma once
#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>

#include "parallel/comm.h"
#include "parallel/flight_recorder.h"
#include "parallel/watchdog.h"

namespace mt::parallel {

class CheckedComm final : public Comm {
 public:
  // Wraps the world. timeout_s > 0 starts the watchdog (0: none); `setting` names where the
  // timeout was set, for its report. Signature checks start off (see check_signatures).
  CheckedComm(std::unique_ptr<Comm> world, double timeout_s, const std::string& setting);
  ~CheckedComm() override;

  // Turns the signature checks on or off for this group and every group split from the same
  // world. Every rank must agree (turn them on at the same point), or the checks' own gathers
  // are out of step: enable them once the ranks are known to share their config.
  void check_signatures(bool on) { shared_->check = on; }

  // This rank's collectives on this group and every group split from the same world, per group
  // and collective, since the last reset (flight_recorder.h).
  CollectiveTotals collective_totals() const {
    return shared_->recorder.totals();
  }
  void reset_collective_totals() { shared_->recorder.reset_totals(); }

  // This group's device twin over another transport (NCCL: device_comms.h), checked like the
  // group: numbered in a sequence of its own, recorded in the same flight recorder and watched by
  // the same watchdog, its signatures compared over this group's own transport (host memory).
  std::unique_ptr<Comm> wrap_twin(std::unique_ptr<Comm> twin);

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  void barrier() override;
  void all_reduce_sum(float* data, int64_t n) override;
  void all_reduce_sum(double* data, int64_t n) override;
  void all_reduce_sum(int64_t* data, int64_t n) override;
  void all_reduce_max(float* data, int64_t n) override;
  void all_gather_bytes(const void* in, void* out, int64_t n, int elem_bytes) override;
  void reduce_scatter_sum(const float* in, float* out, int64_t n) override;
  void broadcast_bytes(void* data, int64_t bytes, int root) override;
  Request iall_gather_bytes(const void* in, void* out, int64_t n, int elem_bytes) override;
  Request ireduce_scatter_sum(const float* in, float* out, int64_t n) override;
  Request iall_reduce_sum(float* data, int64_t n) override;
  // Numbered per group in a sequence of their own (the two ends of a message are one rank's send
  // and another's recv, so they cannot share the collectives' numbers), recorded and watched like
  // collectives; the signature checks, which are collectives of the whole group, skip them.
  void send_bytes(const void* data, int64_t bytes, int peer, int tag) override;
  void recv_bytes(void* data, int64_t bytes, int peer, int tag) override;
  Request isend_bytes(const void* data, int64_t bytes, int peer, int tag) override;
  Request irecv_bytes(void* data, int64_t bytes, int peer, int tag) override;
  std::unique_ptr<Comm> split(int color, int key) override;
  [[noreturn]] void abort(int code) override {
    inner_->abort(code);
    std::abort();  // not reached: GCC does not see [[noreturn]] through the virtual call
  }

 private:
  struct Shared {
    FlightRecorder recorder;
    std::atomic<bool> check{false};
  };
  CheckedComm(std::unique_ptr<Comm> inner, std::shared_ptr<Shared> shared, Comm* checks_over = nullptr);

  // Numbers the collective, records it as blocking and, in debug mode, compares its signature
  // across the group; the returned record is what a non-blocking collective's wait reports.
  CollectiveRecord begin(CollectiveOp op, ElemKind kind, int64_t elem_bytes, int64_t count,
                         int64_t root = 0);
  void compare_signatures(const CollectiveSignature& mine);
  std::shared_ptr<FlightRecorder> recorder() const;  // keeps the shared state alive
  CollectiveRecord begin_p2p(CollectiveOp op, int64_t bytes, int peer);
  template <class F>
  void blocking(const CollectiveRecord&, F&& call);

  std::unique_ptr<Comm> inner_;
  std::shared_ptr<Shared> shared_;
  // Where the signature checks gather (host memory): inner_, or for a twin its host group's.
  Comm* checks_over_;
  int64_t seq_ = 0;
  int64_t p2p_seq_ = 0;  // sends and receives
  std::unique_ptr<Watchdog> watchdog_;  // the world's only; stopped before inner_ goes
};

}  // namespace mt::parallel
