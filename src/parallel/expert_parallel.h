// Expert parallelism (Megatron's and torchtitan's ep), the parts outside the model: which experts
// an ep rank holds, and the two exchanges a mixture-of-experts layer makes through its ep group.
//
// The ep ranks are carved out of the data-parallel ranks: each sees other rows of the batch and
// holds every tensor but the experts as a data-parallel replica would (its gradient summed over
// dp x ep, parallel/fsdp_units.cpp); the experts are split over ep in contiguous ranges, rank c
// holding experts [c E / ep, (c + 1) E / ep) (parallel/layout.h TensorLayout::ep_owner), their
// gradients summed over the ranks holding the same experts (dp, and fsdp x cp within). In a MoE
// layer (model/moe.cpp) every rank routes its own tokens, tells each ep rank how many rows it
// sends to each of its experts (exchange_counts: one small all-gather), sends them
// (start_rows: an all-to-all of variable sizes, as point-to-point pairs: MPI_Isend/Irecv, or
// one NCCL group of sends and receives), computes its experts on the rows it routed to itself
// while the others' travel, then on what arrived, and sends the results back the same way (its
// own rows' last product computed meanwhile); the backward makes the same exchanges for the
// gradients (docs/mesh.md, "Overlapped exchanges", has the schedule).
//
// Why start/wait and not one blocking call: a rank's own rows, 1/ep of what its experts compute
// when the routing is balanced, need no exchange, so computing them first hides the exchange
// behind that much compute (Megatron's and torchtitan's overlap of the all-to-all with the
// experts). The transfers move while the rank computes through the progress engine
// (parallel/mpi_progress.h: the communication thread, or the GEMMs' progress hook). Under NCCL
// the sends and receives are queued until the wait (nccl_comm.cu issues them as one group at the
// next blocking call) and then wait on the compute issued before them: the results are the same,
// the overlap is not there yet on GPUs.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "model/config.h"
#include "model/model_parallel.h"
#include "parallel/comm.h"

namespace mt::parallel {

// The config an ep rank's model computes with: experts [ep_rank E / ep, + E / ep) of `config`'s.
// Throws one line when ep does not divide the experts or the model has none.
ModelConfig expert_parallel_config(const ModelConfig& config, int64_t ep, int64_t ep_rank);

// The ep coordinate holding expert `expert` of `experts` on `ep` ranks.
inline int64_t expert_owner(int64_t expert, int64_t experts, int64_t ep) { return expert / (experts / ep); }

class ExpertParallelGroup {
 public:
  ExpertParallelGroup(Comm& group, Backend& backend) : group_(group), backend_(backend) {}
  // ModelParallel::exchange_expert_counts over the group (host memory).
  void exchange_counts(const int64_t* counts, int64_t* received, int64_t n);
  // ModelParallel::start_expert_rows over the group's device twin: the receives, then the sends,
  // of every other rank's block (this rank's own block is not moved); wait() on the result
  // completes them.
  std::unique_ptr<ModelParallel::ExpertRowsInFlight> start_rows(const Tensor& recv,
                                                                const std::vector<int64_t>& recv_rows,
                                                                const Tensor& send,
                                                                const std::vector<int64_t>& send_rows);
  // start_rows and its wait.
  void exchange_rows(const Tensor& recv, const std::vector<int64_t>& recv_rows, const Tensor& send,
                     const std::vector<int64_t>& send_rows) {
    start_rows(recv, recv_rows, send, send_rows)->wait();
  }
  // Bytes this rank sent to other ranks (its own rows excluded) since the start.
  int64_t bytes_sent() const { return bytes_sent_; }

 private:
  Comm& group_;
  Backend& backend_;
  int64_t bytes_sent_ = 0;
};

}  // namespace mt::parallel
