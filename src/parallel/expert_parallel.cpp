#include "parallel/expert_parallel.h"

#include <string>

#include "core/error.h"
#include "core/profile.h"

namespace mt::parallel {

ModelConfig expert_parallel_config(const ModelConfig& config, int64_t ep, int64_t ep_rank) {
  if (ep == 1) return config;
  if (!config.moe())
    fail("mesh ep=" + std::to_string(ep) + ": the model has no mixture of experts to split (num_experts = 0); "
         "use dp or fsdp for data parallelism");
  if (config.num_experts % ep != 0)
    fail("mesh ep=" + std::to_string(ep) + " does not divide the model's " + std::to_string(config.num_experts) +
         " experts (each ep rank holds whole experts, the same number on each)");
  ModelConfig local = config;
  local.moe_local_experts = config.num_experts / ep;
  local.moe_expert_begin = ep_rank * local.moe_local_experts;
  return local;
}

void ExpertParallelGroup::exchange_counts(const int64_t* counts, int64_t* received, int64_t n) {
  const int64_t S = group_.size(), L = n / S, me = group_.rank();
  MT_CHECK(L * S == n, "expert counts: one per (rank, expert)");
  std::vector<int64_t> all(size_t(n * S));
  group_.all_gather_bytes(counts, all.data(), n, int(sizeof(int64_t)));
  for (int64_t q = 0; q < S; ++q)
    for (int64_t j = 0; j < L; ++j) received[q * L + j] = all[size_t(q * n + me * L + j)];
}

namespace {

// The requests of one exchange: waited for together, and by the destructor if nobody did (an
// exception between start and wait), before the buffers they write go back to other uses.
class RowsInFlight final : public ModelParallel::ExpertRowsInFlight {
 public:
  explicit RowsInFlight(std::vector<Request> pending) : pending_(std::move(pending)) {}
  ~RowsInFlight() override {
    try {
      finish();
    } catch (...) {  // a destructor must not throw; wait() reports the error when called
    }
  }
  void wait() override {
    MT_PROFILE("moe all-to-all");  // the time blocked: what the compute in between did not hide
    finish();
  }

 private:
  void finish() {
    for (auto& r : pending_) r->wait();
    pending_.clear();
  }
  std::vector<Request> pending_;
};

}  // namespace

std::unique_ptr<ModelParallel::ExpertRowsInFlight> ExpertParallelGroup::start_rows(
    const Tensor& recv, const std::vector<int64_t>& recv_rows, const Tensor& send,
    const std::vector<int64_t>& send_rows) {
  MT_PROFILE("moe all-to-all");
  const int S = group_.size(), me = group_.rank();
  MT_CHECK(int(recv_rows.size()) == S && int(send_rows.size()) == S, "expert rows: one count per ep rank");
  MT_CHECK(recv.cols == send.cols && recv.dtype == send.dtype, "expert rows: one width and dtype both ways");
  MT_CHECK(recv_rows[size_t(me)] == send_rows[size_t(me)], "expert rows: this rank's own block is as many rows both ways");
  Comm& device = group_.device();
  constexpr int kExpertTag = 9;
  const int64_t row_bytes = int64_t(send.row_stride());
  std::vector<Request> pending;
  int64_t at = 0;
  for (int q = 0; q < S; ++q) {  // receives first, so every send finds its match posted
    const int64_t n = recv_rows[size_t(q)];
    if (n > 0 && q != me) pending.push_back(device.irecv_bytes(recv.rows_slice(at, n).data, n * row_bytes, q, kExpertTag));
    at += n;
  }
  MT_CHECK(at <= recv.rows, "expert rows: more received than the buffer holds");
  at = 0;
  for (int p = 0; p < S; ++p) {
    const int64_t n = send_rows[size_t(p)];
    if (n > 0 && p != me) {
      pending.push_back(device.isend_bytes(send.rows_slice(at, n).data, n * row_bytes, p, kExpertTag));
      bytes_sent_ += n * row_bytes;
    }
    at += n;
  }
  MT_CHECK(at <= send.rows, "expert rows: more sent than the buffer holds");
  return std::make_unique<RowsInFlight>(std::move(pending));
}

}  // namespace mt::parallel
