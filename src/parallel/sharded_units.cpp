// The ModelParallel side of the sharded model: gathering units over fsdp (prefetched one unit
// ahead), freeing them, reduce-scattering their gradients, and the sums and norm that finish a
// step.
#include <chrono>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/profile.h"
#include "parallel/sharded_model.h"
#include "parallel/sharded_units.h"

namespace mt::parallel {

namespace {

using Clock = std::chrono::steady_clock;

class Timer {
 public:
  explicit Timer(double& total) : total_(total), t0_(Clock::now()) {}
  ~Timer() { total_ += std::chrono::duration<double>(Clock::now() - t0_).count(); }

 private:
  double& total_;
  Clock::time_point t0_;
};

}  // namespace

void ShardedModel::start_gather(int u) {
  Unit& U = *units_[size_t(u)];
  if (U.split.empty() || U.gathering || U.held) return;
  MT_PROFILE("fsdp gather (issue)");
  U.recv = pool_.take<uint16_t>(size_t(U.chunk * mesh_.shape().fsdp));
  const uint16_t* send = U.direct_send;
  if (!send) {
    U.send = pool_.take<uint16_t>(size_t(U.chunk));
    for (size_t i = 0; i < U.split.size(); ++i) {
      const ShardSlot& s = *U.split[i];
      const int64_t n = s.box.numel();
      if (s.gather_compute) std::memcpy(U.send + U.chunk_compute[i], s.shard->compute, size_t(n) * 2);
      if (s.gather_master) std::memcpy(U.send + U.chunk_master[i], s.shard->master, size_t(n) * 4);
    }
    send = U.send;
  }
  U.gather = mesh_.axis(Axis::fsdp).iall_gather_bytes(send, U.recv, U.chunk, 2);
  U.gathering = true;
}

void ShardedModel::finish_gather(int u) {
  Unit& U = *units_[size_t(u)];
  {
    MT_PROFILE("fsdp gather (wait)");
    Timer t(exposed_s_);
    U.gather->wait();
  }
  MT_PROFILE("fsdp gather (unpack)");
  U.gathering = false;
  U.compute = pool_.take<bf16>(size_t(U.compute_elems));
  U.master = pool_.take<float>(size_t(U.master_elems));
  const int64_t F = mesh_.shape().fsdp;
  // Every (tensor, peer) piece lands in its own region of the unit buffer: spread over threads.
  const int64_t pieces = int64_t(U.split.size()) * F;
#pragma omp parallel for schedule(dynamic, 1) if (pieces > 1 && U.compute_elems + U.master_elems > (1 << 16))
  for (int64_t k = 0; k < pieces; ++k) {
    const size_t i = size_t(k / F);
    const int64_t f = k % F;
    const ShardSlot& s = *U.split[i];
    const TensorBox whole = TensorBox::whole(s.tp_box.shape());
    const uint16_t* piece = U.recv + f * U.chunk;
    const TensorBox& pb = s.peer_boxes[size_t(f)];
    if (s.gather_compute)
      copy_box(reinterpret_cast<const bf16*>(piece + U.chunk_compute[i]), pb,
               U.compute + U.compute_off[i], whole, pb);
    if (s.gather_master)
      copy_box(reinterpret_cast<const float*>(piece + U.chunk_master[i]), pb,
               U.master + U.master_off[i], whole, pb);
  }
  for (size_t i = 0; i < U.split.size(); ++i) {
    ShardSlot& s = *U.split[i];
    s.model->compute = s.gather_compute ? U.compute + U.compute_off[i] : nullptr;
    s.model->master = s.gather_master ? U.master + U.master_off[i] : nullptr;
  }
  pool_.give(U.send);
  pool_.give(U.recv);
  U.send = nullptr, U.recv = nullptr;
}

void ShardedModel::acquire(int u, bool grads, bool weights) {
  Unit& U = *units_[size_t(u)];
  if (!U.held) {
    if (!U.split.empty() && (weights || U.gathering)) {
      start_gather(u);  // no-op when prefetched
      finish_gather(u);
    }
    U.held = true;
    // Prefetch the unit that comes next in this pass, so its gather overlaps this unit's compute.
    // The last unit of the backward, an untied embedding, needs no weights (see ModelParallel).
    const int next = grads ? u - 1 : u + 1;
    const bool next_reads_weights = !(grads && next == 0 && !full_.tie_word_embeddings);
    if (prefetch_ && next >= 0 && next < num_units() && next_reads_weights) start_gather(next);
  }
  if (grads && !U.has_grads) {
    U.grad = pool_.take<float>(size_t(U.grad_elems));
    if (U.grad) std::memset(U.grad, 0, size_t(U.grad_elems) * sizeof(float));
    for (size_t i = 0; i < U.split.size(); ++i)
      if (U.split[i]->trainable) U.split[i]->model->grad = U.grad + U.grad_off[i];
    U.has_grads = true;
  }
}

void ShardedModel::release(int u, bool grads) {
  Unit& U = *units_[size_t(u)];
  // The weights go first, so their block can hold the reduce-scatter staging below.
  if (!U.split.empty()) {
    for (auto* s : U.split) s->model->compute = nullptr, s->model->master = nullptr;
    pool_.give(U.compute);
    pool_.give(U.master);
    U.compute = nullptr, U.master = nullptr;
  }
  U.held = false;
  if (!grads || !U.has_grads) return;
  if (U.grad_chunk > 0) {
    complete_scatters();  // at most one unit's reduce-scatter in flight
    MT_PROFILE("fsdp reduce-scatter (issue)");
    const int64_t F = mesh_.shape().fsdp;
    auto ps = std::make_unique<PendingScatter>();
    ps->unit = &U;
    ps->send = pool_.take<float>(size_t(U.grad_chunk * F));
    ps->recv = pool_.take<float>(size_t(U.grad_chunk));
    const int64_t pieces = int64_t(U.split.size()) * F;  // disjoint destinations, as above
#pragma omp parallel for schedule(dynamic, 1) if (pieces > 1 && U.grad_elems > (1 << 16))
    for (int64_t k = 0; k < pieces; ++k) {
      const size_t i = size_t(k / F);
      const int64_t f = k % F;
      const ShardSlot& s = *U.split[i];
      if (!s.trainable) continue;
      const TensorBox& pb = s.peer_boxes[size_t(f)];
      copy_box(U.grad + U.grad_off[i], TensorBox::whole(s.tp_box.shape()),
               ps->send + f * U.grad_chunk + U.grad_chunk_off[i], pb, pb);
    }
    ps->request = mesh_.axis(Axis::fsdp).ireduce_scatter_sum(ps->send, ps->recv, U.grad_chunk);
    scatters_.push_back(std::move(ps));
  }
  for (auto* s : U.split)
    if (s->trainable) s->model->grad = nullptr;
  pool_.give(U.grad);
  U.grad = nullptr;
  U.has_grads = false;
}

void ShardedModel::complete_scatters() {
  for (auto& ps : scatters_) {
    {
      MT_PROFILE("fsdp reduce-scatter (wait)");
      Timer t(exposed_s_);
      ps->request->wait();
    }
    const Unit& U = *ps->unit;
    for (size_t i = 0; i < U.split.size(); ++i) {
      const ShardSlot& s = *U.split[i];
      if (!s.trainable) continue;
      const float* src = ps->recv + U.grad_chunk_off[i];
      float* dst = s.shard->grad;
      const int64_t n = s.box.numel();
#pragma omp parallel for simd schedule(static) if (n > (1 << 16))
      for (int64_t k = 0; k < n; ++k) dst[k] += src[k];
    }
    pool_.give(ps->send);
    pool_.give(ps->recv);
  }
  scatters_.clear();
}

void ShardedModel::finish_gradients() {
  complete_scatters();
  MT_PROFILE("gradient all-reduce");
  ParamStore& params = trainable_shards();
  if (mesh_.shape().dp > 1 && params.trainable_numel() > 0)
    mesh_.axis(Axis::dp).all_reduce_sum(params.grad_data(), params.trainable_numel());
  // Blocks summed over a further axis: unsplit over fsdp (each fsdp rank saw other rows), and
  // partial sums over tp. Packed so each axis costs one collective.
  auto reduce_where = [&](Axis axis, auto&& pick) {
    if (mesh_.shape().size(axis) == 1) return;
    std::vector<float> packed;
    for (const auto& s : slots_)
      if (s.trainable && pick(s)) packed.insert(packed.end(), s.shard->grad, s.shard->grad + s.box.numel());
    if (packed.empty()) return;
    mesh_.axis(axis).all_reduce_sum(packed.data(), int64_t(packed.size()));
    size_t at = 0;
    for (const auto& s : slots_)
      if (s.trainable && pick(s)) {
        std::copy(packed.begin() + int64_t(at), packed.begin() + int64_t(at) + s.box.numel(), s.shard->grad);
        at += size_t(s.box.numel());
      }
  };
  reduce_where(Axis::fsdp, [](const ShardSlot& s) { return !s.split_fsdp; });
  reduce_where(Axis::tp, [](const ShardSlot& s) { return s.partial_over_tp; });
}

double ShardedModel::grad_norm() {
  double sq = 0.0;
  for (const auto& s : slots_) {
    if (!s.trainable || !s.writer) continue;
    double part = 0.0;
    for (int64_t k = 0, n = s.box.numel(); k < n; ++k) part += double(s.shard->grad[k]) * s.shard->grad[k];
    sq += part;
  }
  mesh_.world().all_reduce_sum(&sq, 1);
  return std::sqrt(sq);
}

}  // namespace mt::parallel
