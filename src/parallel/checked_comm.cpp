#include "parallel/checked_comm.h"

#include <cstdio>
#include <type_traits>
#include <vector>

#include "core/error.h"

namespace mt::parallel {
namespace {

// Gathered as plain int64s (all_gather_bytes of 8-byte elements).
static_assert(std::is_trivially_copyable_v<CollectiveSignature> &&
              sizeof(CollectiveSignature) == 6 * sizeof(int64_t));
constexpr int64_t kSignatureWords = 6;

// A non-blocking collective: its wait is what blocks, so the wait is what the recorder shows.
class CheckedRequest final : public CommRequest {
 public:
  // `recorder` is shared with the group, so a request may outlive its Comm.
  CheckedRequest(Request inner, std::shared_ptr<FlightRecorder> recorder, CollectiveRecord record)
      : inner_(std::move(inner)), recorder_(recorder), record_(std::move(record)) {
    record_.waiting = true;
  }
  ~CheckedRequest() override {
    if (!inner_) return;
    recorder_->enter(record_);
    inner_.reset();  // waits; never throws
    recorder_->leave();
  }
  void wait() override {
    if (!inner_) return;
    recorder_->enter(record_);
    try {
      inner_->wait();
    } catch (...) {
      recorder_->leave();
      throw;
    }
    recorder_->leave();
    inner_.reset();
  }

 private:
  Request inner_;
  std::shared_ptr<FlightRecorder> recorder_;
  CollectiveRecord record_;
};

}  // namespace

CheckedComm::CheckedComm(std::unique_ptr<Comm> world, double timeout_s, const std::string& setting)
    : CheckedComm(std::move(world), std::make_shared<Shared>()) {
  set_name(inner_->name());
  if (timeout_s <= 0) return;
  const std::string label = "rank " + std::to_string(inner_->rank());
  Comm* world_comm = inner_.get();
  watchdog_ = std::make_unique<Watchdog>(
      shared_->recorder, timeout_s, label, setting, [world_comm, label](const std::string& report) {
        std::fprintf(stderr, "meshtrain: watchdog [%s/%d]: %s", label.c_str(), world_comm->size(),
                     report.c_str());
        std::fflush(stderr);
        world_comm->abort(1);
      });
}

CheckedComm::CheckedComm(std::unique_ptr<Comm> inner, std::shared_ptr<Shared> shared, Comm* checks_over)
    : inner_(std::move(inner)), shared_(std::move(shared)),
      checks_over_(checks_over ? checks_over : inner_.get()) {}

std::unique_ptr<Comm> CheckedComm::wrap_twin(std::unique_ptr<Comm> twin) {
  auto out = std::unique_ptr<CheckedComm>(new CheckedComm(std::move(twin), shared_, inner_.get()));
  out->set_name(name() + " (device)");
  return out;
}

CheckedComm::~CheckedComm() = default;

std::shared_ptr<FlightRecorder> CheckedComm::recorder() const {
  return std::shared_ptr<FlightRecorder>(shared_, &shared_->recorder);
}

CollectiveRecord CheckedComm::begin(CollectiveOp op, ElemKind kind, int64_t elem_bytes,
                                    int64_t count, int64_t root) {
  CollectiveRecord r;
  r.group = name();
  r.sig = {.seq = ++seq_, .op = op, .kind = kind, .elem_bytes = elem_bytes, .count = count,
           .root = root};
  return r;
}

CollectiveRecord CheckedComm::begin_p2p(CollectiveOp op, int64_t bytes, int peer) {
  CollectiveRecord r;
  r.group = name();
  r.sig = {.seq = ++p2p_seq_, .op = op, .kind = ElemKind::raw, .elem_bytes = 1, .count = bytes,
           .root = peer};
  return r;
}

template <class F>
void CheckedComm::blocking(const CollectiveRecord& r, F&& call) {
  FlightRecorder& recorder = shared_->recorder;
  recorder.enter(r);
  try {
    const bool p2p = r.sig.op == CollectiveOp::send || r.sig.op == CollectiveOp::recv;
    if (shared_->check && !p2p) compare_signatures(r.sig);
    call();
  } catch (...) {
    recorder.leave();
    throw;
  }
  recorder.leave();
}

void CheckedComm::compare_signatures(const CollectiveSignature& mine) {
  const size_t n = size_t(size());
  std::vector<CollectiveSignature> all(n);
  all[size_t(rank())] = mine;
  checks_over_->all_gather_bytes(&all[size_t(rank())], all.data(), kSignatureWords, 8);
  std::string differing;
  int64_t count = 0;
  for (size_t r = 1; r < n; ++r) {
    if (all[r] == all[0]) continue;
    if (++count <= 3) differing += ", rank " + std::to_string(r) + " calls " + describe(all[r]);
  }
  if (count == 0) return;
  if (count > 3) differing += ", and " + std::to_string(count - 3) + " more ranks differ";
  fail("collectives out of step on group " + name() + ": rank 0 of " + name() + " calls " +
       describe(all[0]) + differing +
       " (every rank must make the same collectives in the same order)");
}

void CheckedComm::barrier() {
  blocking(begin(CollectiveOp::barrier, ElemKind::raw, 0, 0), [&] { inner_->barrier(); });
}

void CheckedComm::all_reduce_sum(float* data, int64_t n) {
  blocking(begin(CollectiveOp::all_reduce_sum, ElemKind::f32, 4, n),
           [&] { inner_->all_reduce_sum(data, n); });
}

void CheckedComm::all_reduce_sum(double* data, int64_t n) {
  blocking(begin(CollectiveOp::all_reduce_sum, ElemKind::f64, 8, n),
           [&] { inner_->all_reduce_sum(data, n); });
}

void CheckedComm::all_reduce_sum(int64_t* data, int64_t n) {
  blocking(begin(CollectiveOp::all_reduce_sum, ElemKind::i64, 8, n),
           [&] { inner_->all_reduce_sum(data, n); });
}

void CheckedComm::all_reduce_max(float* data, int64_t n) {
  blocking(begin(CollectiveOp::all_reduce_max, ElemKind::f32, 4, n),
           [&] { inner_->all_reduce_max(data, n); });
}

void CheckedComm::all_gather_bytes(const void* in, void* out, int64_t n, int elem_bytes) {
  blocking(begin(CollectiveOp::all_gather, ElemKind::raw, elem_bytes, n),
           [&] { inner_->all_gather_bytes(in, out, n, elem_bytes); });
}

void CheckedComm::reduce_scatter_sum(const float* in, float* out, int64_t n) {
  blocking(begin(CollectiveOp::reduce_scatter_sum, ElemKind::f32, 4, n),
           [&] { inner_->reduce_scatter_sum(in, out, n); });
}

void CheckedComm::broadcast_bytes(void* data, int64_t bytes, int root) {
  blocking(begin(CollectiveOp::broadcast, ElemKind::raw, 1, bytes, root),
           [&] { inner_->broadcast_bytes(data, bytes, root); });
}

// Non-blocking: numbered (and checked) at the issue, which is where the order between ranks is
// fixed; the issue itself does not block, the wait does.
Request CheckedComm::iall_gather_bytes(const void* in, void* out, int64_t n, int elem_bytes) {
  const CollectiveRecord r = begin(CollectiveOp::all_gather, ElemKind::raw, elem_bytes, n);
  Request inner;
  blocking(r, [&] { inner = inner_->iall_gather_bytes(in, out, n, elem_bytes); });
  return std::make_unique<CheckedRequest>(std::move(inner), recorder(), r);
}

Request CheckedComm::iall_reduce_sum(float* data, int64_t n) {
  const CollectiveRecord r = begin(CollectiveOp::all_reduce_sum, ElemKind::f32, 4, n);
  Request inner;
  blocking(r, [&] { inner = inner_->iall_reduce_sum(data, n); });
  return std::make_unique<CheckedRequest>(std::move(inner), recorder(), r);
}

Request CheckedComm::ireduce_scatter_sum(const float* in, float* out, int64_t n) {
  const CollectiveRecord r = begin(CollectiveOp::reduce_scatter_sum, ElemKind::f32, 4, n);
  Request inner;
  blocking(r, [&] { inner = inner_->ireduce_scatter_sum(in, out, n); });
  return std::make_unique<CheckedRequest>(std::move(inner), recorder(), r);
}

void CheckedComm::send_bytes(const void* data, int64_t bytes, int peer, int tag) {
  blocking(begin_p2p(CollectiveOp::send, bytes, peer),
           [&] { inner_->send_bytes(data, bytes, peer, tag); });
}

void CheckedComm::recv_bytes(void* data, int64_t bytes, int peer, int tag) {
  blocking(begin_p2p(CollectiveOp::recv, bytes, peer),
           [&] { inner_->recv_bytes(data, bytes, peer, tag); });
}

Request CheckedComm::isend_bytes(const void* data, int64_t bytes, int peer, int tag) {
  const CollectiveRecord r = begin_p2p(CollectiveOp::send, bytes, peer);
  Request inner;
  blocking(r, [&] { inner = inner_->isend_bytes(data, bytes, peer, tag); });
  return std::make_unique<CheckedRequest>(std::move(inner), recorder(), r);
}

Request CheckedComm::irecv_bytes(void* data, int64_t bytes, int peer, int tag) {
  const CollectiveRecord r = begin_p2p(CollectiveOp::recv, bytes, peer);
  Request inner;
  blocking(r, [&] { inner = inner_->irecv_bytes(data, bytes, peer, tag); });
  return std::make_unique<CheckedRequest>(std::move(inner), recorder(), r);
}

std::unique_ptr<Comm> CheckedComm::split(int color, int key) {
  // A twin's checks gather over its host group, which a split of the twin would not have.
  MT_CHECK(checks_over_ == inner_.get(), "split of a device twin: split its host group instead");
  std::unique_ptr<Comm> sub;
  blocking(begin(CollectiveOp::split, ElemKind::raw, 0, 0),
           [&] { sub = inner_->split(color, key); });
  auto out = std::unique_ptr<CheckedComm>(new CheckedComm(std::move(sub), shared_));
  out->set_name("split of " + name());
  return out;
}

}  // namespace mt::parallel
