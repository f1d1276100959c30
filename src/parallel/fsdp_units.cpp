// FSDP, the ModelParallel side of the sharded model: gathering units over the shard group (fsdp,
// or fsdp x cp under context parallelism; prefetched one unit ahead), freeing them,
// reduce-scattering their gradients, and the sums and norm that finish a step. Tensor
// parallelism's reductions are in tensor_parallel.cpp.
#include <chrono>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/profile.h"
#include "parallel/sharded_model.h"
#include "parallel/fsdp_units.h"
#include "parallel/replica_gradients.h"

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

// The rows of a box of an NF4 tensor in its uint16 word grid [rows, words per row].
TensorBox word_box(const TensorBox& b, int64_t words) {
  TensorBox w;
  w.begin = {b.begin[0], 0}, w.end = {b.end[0], words};
  return w;
}

}  // namespace

void ShardedModel::start_gather(int u) {
  Unit& U = *units_[size_t(u)];
  if (U.split.empty() || U.gathering || U.held) return;
  MT_PROFILE("fsdp gather (issue)");
  U.recv = pool_.take<uint16_t>(size_t(U.chunk * mesh_.shape().shards()));
  const uint16_t* send = U.direct_send;
  if (!send) {
    U.send = pool_.take<uint16_t>(size_t(U.chunk));
    for (size_t i = 0; i < U.split.size(); ++i) {
      const ShardSlot& s = *U.split[i];
      const int64_t n = s.box.numel();
      if (s.gather_compute)
        backend_.copy(backend_.view(U.send + U.chunk_compute[i], DType::bf16, 1, n),
                      s.shard->compute_tensor().view(1, n));
      if (s.gather_master)
        backend_.copy(backend_.view(U.send + U.chunk_master[i], DType::f32, 1, n),
                      s.shard->master_tensor().view(1, n));
      if (s.gather_quant)
        backend_.copy(backend_.view(U.send + U.chunk_quant[i], DType::nf4, s.box.shape()[0], s.box.shape()[1]),
                      s.shard->quant_tensor());
    }
    send = U.send;
  }
  U.gather = mesh_.shard_group().device().iall_gather_bytes(send, U.recv, U.chunk, 2);
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
  U.quant = pool_.take<uint16_t>(size_t(U.quant_words));
  const int64_t F = mesh_.shape().shards();
  // Every (tensor, peer) piece lands in its own region of the unit buffer: one batch of box
  // copies, issued from this thread (the backend's own: a device backend's work must not come
  // from another thread), which the CPU backend spreads over its threads (Backend::copy_boxes).
  std::vector<BoxCopy> copies;
  copies.reserve(U.split.size() * size_t(F) * 3);
  for (size_t i = 0; i < U.split.size(); ++i) {
    const ShardSlot& s = *U.split[i];
    const TensorBox whole = TensorBox::whole(s.tp_box.shape());
    for (int64_t f = 0; f < F; ++f) {
      uint16_t* piece = U.recv + f * U.chunk;
      const TensorBox& pb = s.peer_boxes[size_t(f)];
      if (s.gather_compute)
        copies.push_back({backend_.view(piece + U.chunk_compute[i], DType::bf16, 1, pb.numel()), pb,
                          backend_.view(U.compute + U.compute_off[i], DType::bf16, 1, whole.numel()),
                          whole, pb});
      if (s.gather_master)
        copies.push_back({backend_.view(piece + U.chunk_master[i], DType::f32, 1, pb.numel()), pb,
                          backend_.view(U.master + U.master_off[i], DType::f32, 1, whole.numel()),
                          whole, pb});
      if (s.gather_quant) {
        // Whole rows of records, moved as uint16 words (bf16 is the 16-bit element copy_box knows).
        const int64_t w = s.words_per_row();
        const TensorBox wb = word_box(pb, w), wwhole = word_box(whole, w);
        copies.push_back({backend_.view(piece + U.chunk_quant[i], DType::bf16, 1, wb.numel()), wb,
                          backend_.view(U.quant + U.quant_off[i], DType::bf16, 1, wwhole.numel()),
                          wwhole, wb});
      }
    }
  }
  backend_.copy_boxes(copies);
  for (size_t i = 0; i < U.split.size(); ++i) {
    ShardSlot& s = *U.split[i];
    s.model->compute = s.gather_compute ? U.compute + U.compute_off[i] : nullptr;
    s.model->master = s.gather_master ? U.master + U.master_off[i] : nullptr;
    s.model->quant = s.gather_quant ? reinterpret_cast<uint8_t*>(U.quant + U.quant_off[i]) : nullptr;
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
    if (U.grad) backend_.fill(backend_.view(U.grad, DType::f32, 1, U.grad_elems), 0.0f);
    for (size_t i = 0; i < U.split.size(); ++i)
      if (U.split[i]->trainable) U.split[i]->model->grad = U.grad + U.grad_off[i];
    U.has_grads = true;
  }
}

void ShardedModel::release(int u, bool grads) {
  Unit& U = *units_[size_t(u)];
  // The weights go first, so their block can hold the reduce-scatter staging below.
  if (!U.split.empty()) {
    for (auto* s : U.split) s->model->compute = nullptr, s->model->master = nullptr, s->model->quant = nullptr;
    pool_.give(U.compute);
    pool_.give(U.master);
    pool_.give(U.quant);
    U.compute = nullptr, U.master = nullptr, U.quant = nullptr;
  }
  U.held = false;
  if (!grads || !U.has_grads) return;
  if (U.grad_chunk > 0) {
    complete_scatters();  // at most one unit's reduce-scatter in flight
    MT_PROFILE("fsdp reduce-scatter (issue)");
    const int64_t F = mesh_.shape().shards();
    auto ps = std::make_unique<PendingScatter>();
    ps->unit = &U;
    ps->index = u;
    ps->send = pool_.take<float>(size_t(U.grad_chunk * F));
    ps->recv = pool_.take<float>(size_t(U.grad_chunk));
    // Every (tensor, peer) piece into its own region of the send buffer: one batch, as above.
    std::vector<BoxCopy> copies;
    copies.reserve(U.split.size() * size_t(F));
    for (size_t i = 0; i < U.split.size(); ++i) {
      const ShardSlot& s = *U.split[i];
      if (!s.trainable) continue;
      const TensorBox whole = TensorBox::whole(s.tp_box.shape());
      for (int64_t f = 0; f < F; ++f) {
        const TensorBox& pb = s.peer_boxes[size_t(f)];
        copies.push_back({backend_.view(U.grad + U.grad_off[i], DType::f32, 1, whole.numel()), whole,
                          backend_.view(ps->send + f * U.grad_chunk + U.grad_chunk_off[i], DType::f32, 1,
                                        pb.numel()),
                          pb, pb});
      }
    }
    backend_.copy_boxes(copies);
    // Over fsdp x cp: the sum of the cp ranks' partials (each saw other tokens of the rows) comes
    // with the fsdp sum, so no cp all-reduce follows.
    ps->request = mesh_.shard_group().device().ireduce_scatter_sum(ps->send, ps->recv, U.grad_chunk);
    scatters_.push_back(std::move(ps));
  }
  const bool scattering = U.grad_chunk > 0;
  for (auto* s : U.split)
    if (s->trainable) s->model->grad = nullptr;
  pool_.give(U.grad);
  U.grad = nullptr;
  U.has_grads = false;
  // Gradients read in place (not split over fsdp x cp) are this micro-batch's whole share now; split
  // ones once their reduce-scatter lands (complete_scatters).
  if (dp_buckets_ && !scattering) dp_buckets_->unit_done(u, trainable_shards().grad_data());
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
      const int64_t n = s.box.numel();
      backend_.add(s.shard->grad_tensor().view(1, n),
                   backend_.view(ps->recv + U.grad_chunk_off[i], DType::f32, 1, n));
    }
    pool_.give(ps->send);
    pool_.give(ps->recv);
    if (dp_buckets_) dp_buckets_->unit_done(ps->index, trainable_shards().grad_data());
  }
  scatters_.clear();
}

void ShardedModel::set_dp_buckets(int64_t bytes) {
  dp_buckets_.reset();
  ParamStore& params = trainable_shards();
  if (mesh_.shape().dp == 1 || params.trainable_numel() == 0) return;
  dp_buckets_ = std::make_unique<GradientBuckets>(mesh_.axis(Axis::dp).device(), unit_grad_ranges(params, full_),
                                                  bytes);
}

std::string ShardedModel::describe_gradient_reduction() const {
  return dp_buckets_ ? dp_buckets_->describe() : std::string();
}

void ShardedModel::begin_step(int64_t micro_batches) {
  if (dp_buckets_) dp_buckets_->begin_step(micro_batches);
}

void ShardedModel::finish_gradients() {
  complete_scatters();
  MT_PROFILE("gradient all-reduce");
  ParamStore& params = trainable_shards();
  // Replicas over dp (each saw other rows) sum their whole gradients: the buckets the backward did
  // not finish, then the wait for all of them. (The cp ranks hold no replicas: their partials were
  // summed by the reduce-scatters over fsdp x cp, and below for the blocks not split.)
  if (dp_buckets_) dp_exposed_s_ += dp_buckets_->finish(params.grad_data());
  // Blocks summed over further axes: unsplit over fsdp x cp (each fsdp rank saw other rows, each
  // cp rank other tokens of them), and partial sums over tp. Packed so each group costs one
  // collective.
  auto reduce_where = [&](AxisSet axes, auto&& pick) {
    Comm& group = mesh_.group(axes);
    if (group.size() == 1) return;
    int64_t total = 0;
    for (const auto& s : slots_)
      if (s.trainable && pick(s)) total += s.box.numel();
    if (total == 0) return;
    float* packed = pool_.take<float>(size_t(total));
    // Packs (to_packed) or unpacks every picked gradient, in slot order.
    auto move = [&](bool to_packed) {
      int64_t at = 0;
      for (const auto& s : slots_)
        if (s.trainable && pick(s)) {
          const int64_t n = s.box.numel();
          const Tensor grad = s.shard->grad_tensor().view(1, n);
          const Tensor part = backend_.view(packed + at, DType::f32, 1, n);
          to_packed ? backend_.copy(part, grad) : backend_.copy(grad, part);
          at += n;
        }
    };
    move(true);
    group.device().all_reduce_sum(packed, total);
    move(false);
    pool_.give(packed);
  };
  // Under expert parallelism the ep ranks are replicas of every tensor but the experts (each saw
  // other rows): those sum over ep too; an expert's other holders are dp and fsdp x cp only.
  const AxisSet ep = axis_bit(Axis::ep);
  reduce_where(Mesh::shard_axes() | ep, [](const ShardSlot& s) { return !s.split_fsdp && !s.expert; });
  reduce_where(Mesh::shard_axes(), [](const ShardSlot& s) { return !s.split_fsdp && s.expert; });
  reduce_where(ep, [](const ShardSlot& s) { return s.split_fsdp && !s.expert; });
  reduce_where(axis_bit(Axis::tp), [](const ShardSlot& s) { return s.partial_over_tp; });
  sum_tied_embedding_over_stages();
}

void ShardedModel::sum_tied_embedding_over_stages() {
  const int64_t stages = mesh_.shape().pp, stage = mesh_.coord(Axis::pp);
  if (!full_.tie_word_embeddings || stages == 1 || (stage != 0 && stage != stages - 1)) return;
  // The first stage's lookup and the last stage's head each gave part of the embedding's gradient
  // (and of a tied head's adapters): both add the other's, a + b == b + a, so the copies stay equal.
  int64_t total = 0;
  for (const auto& s : slots_)
    if (s.trainable && s.unit == 0) total += s.box.numel();
  if (total == 0) return;
  MT_PROFILE("tied embedding sum over pp");
  std::vector<float> mine(static_cast<size_t>(total)), theirs(static_cast<size_t>(total));
  int64_t at = 0;
  for (const auto& s : slots_)
    if (s.trainable && s.unit == 0) {
      backend_.copy_to_host(mine.data() + at, s.shard->grad_tensor());
      at += s.box.numel();
    }
  Comm& pp = mesh_.axis(Axis::pp);
  const int peer = stage == 0 ? int(stages - 1) : 0;
  const int64_t bytes = total * int64_t(sizeof(float));
  constexpr int kTiedTag = 3;  // pipeline.cpp's activations and gradients use 4 and up
  Request sent = pp.isend_bytes(mine.data(), bytes, peer, kTiedTag);
  pp.recv_bytes(theirs.data(), bytes, peer, kTiedTag);
  sent->wait();
  for (size_t i = 0; i < mine.size(); ++i) mine[i] += theirs[i];
  at = 0;
  for (const auto& s : slots_)
    if (s.trainable && s.unit == 0) {
      backend_.copy_from_host(s.shard->grad_tensor(), mine.data() + at);
      at += s.box.numel();
    }
}

double ShardedModel::grad_norm() {
  double sq = 0.0;
  for (const auto& s : slots_) {
    if (!s.trainable || !s.writer) continue;
    sq += backend_.sum_squares(s.shard->grad_tensor());
  }
  mesh_.world().all_reduce_sum(&sq, 1);
  return std::sqrt(sq);
}

}  // namespace mt::parallel
