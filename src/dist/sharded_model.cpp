#include "dist/sharded_model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/profile.h"
#include "dist/shard_plan.h"
#include "model/param_shapes.h"

namespace mt::dist {

// One unit's gathered tensors and the collectives in flight for it.
struct ShardedModel::Unit {
  std::vector<ShardSlot*> split;   // gathered over fsdp, in parameter order
  // Per split slot: offsets into the gather chunk (uint16 units) and into the unit buffers.
  std::vector<int64_t> chunk_compute, chunk_master, compute_off, master_off, grad_off, grad_chunk_off;
  int64_t chunk = 0;                        // uint16 units each rank sends
  int64_t compute_elems = 0, master_elems = 0, grad_elems = 0, grad_chunk = 0;
  // When this rank's blocks already lie back to back in gather order (a block's bf16 copies, or
  // its f32 masters in fp32 mode), the gather sends from the shard store itself: no staging copy.
  const uint16_t* direct_send = nullptr;
  // Pool blocks while in use, else null.
  uint16_t* send = nullptr;
  uint16_t* recv = nullptr;
  bf16* compute = nullptr;
  float* master = nullptr;
  float* grad = nullptr;
  Request gather;
  bool gathering = false, held = false, has_grads = false;
};

struct ShardedModel::PendingScatter {
  Unit* unit = nullptr;
  float* send = nullptr;  // pool blocks
  float* recv = nullptr;
  Request request;
};

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

TensorBox box_of(const TensorLayout& layout, int64_t rank) {
  TensorBox b;
  for (size_t d = 0; d < layout.shape.size(); ++d) {
    Range r = layout.range(rank, d);
    b.begin.push_back(r.begin), b.end.push_back(r.end);
  }
  return b;
}

TensorBox relative_to(const TensorBox& b, const TensorBox& origin) {
  TensorBox r = b;
  for (size_t d = 0; d < b.rank(); ++d) r.begin[d] -= origin.begin[d], r.end[d] -= origin.begin[d];
  return r;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// 0 = embedding, 1..L = blocks, L + 1 = final norm and head (a tied head's adapter: unit 0).
int unit_of(const std::string& name, const LlamaConfig& c) {
  const std::string layers = "model.layers.";
  if (name.rfind(layers, 0) == 0) return std::stoi(name.substr(layers.size())) + 1;
  if (name == kEmbedName) return 0;
  if (name.rfind("lm_head.", 0) == 0 && c.tie_word_embeddings) return 0;
  return int(c.num_hidden_layers) + 1;
}

ParamPlan plan_of(const Param& p) {
  return ParamPlan{p.master_offset >= 0, p.compute_offset >= 0, p.grad_offset >= 0, p.decay};
}

}  // namespace

ShardedModel::ShardedModel(Mesh& mesh, const LlamaConfig& full, Precision precision,
                           const LoraConfig& lora, const PartitionRules& rules)
    : mesh_(mesh), full_(full), precision_(precision), lora_(lora) {
  local_ = tensor_parallel_config(full_, mesh_.shape().tp);
  model_ = std::make_unique<LlamaModel>(local_, precision_, lora_, /*own_storage=*/false);
  if (mesh_.shape().tp > 1) partials_ = std::make_unique<CommPartialSums>(mesh_.axis(Axis::tp));
  build_slots(rules);
  build_units();
  point_model_at_shards();
  model_->set_parallel(this);
}

ShardedModel::~ShardedModel() {
  for (auto& s : scatters_)
    if (s->request) s->request->wait();
  for (auto& u : units_)
    if (u->gathering) u->gather->wait();
}

const ShardSlot& ShardedModel::slot(const std::string& name) const {
  for (const auto& s : slots_)
    if (s.name == name) return s;
  fail("no parameter named '" + name + "'");
}

void ShardedModel::build_slots(const PartitionRules& rules) {
  const MeshShape& shape = mesh_.shape();
  const int64_t rank = mesh_.rank();
  const auto sharded = shard_params(llama_param_shapes(full_, lora_), lora_.enabled, rules, shape);
  for (const ShardedParam& sp : sharded) {
    ShardSlot s;
    s.name = sp.param.name;
    s.layout = sp.layout;
    s.full_shape = sp.param.shape;
    s.trainable = sp.trainable;
    s.box = box_of(sp.layout, rank);
    // The fsdp peers: same coordinates except along fsdp. Their blocks must tile this rank's
    // tensor-parallel share, which is what the model computes with.
    Coords c = mesh_.coords();
    std::vector<TensorBox> peers;
    for (int64_t f = 0; f < shape.fsdp; ++f) {
      c[size_t(Axis::fsdp)] = f;
      peers.push_back(box_of(sp.layout, rank_of(shape, c)));
    }
    s.tp_box = peers[0];
    int64_t tiled = 0;
    for (const auto& p : peers) {
      for (size_t d = 0; d < p.rank(); ++d) {
        s.tp_box.begin[d] = std::min(s.tp_box.begin[d], p.begin[d]);
        s.tp_box.end[d] = std::max(s.tp_box.end[d], p.end[d]);
      }
      tiled += p.numel();
    }
    if (shape.fsdp > 1 && tiled != s.tp_box.numel() && s.tp_box != s.box)
      fail("partition rules: the fsdp blocks of " + s.name + " (" + sp.layout.spec.str() +
           ") do not tile its tensor-parallel share; list tp before fsdp on a dimension both split");
    ParamStore& store = sp.param.adapter ? model_->adapters() : model_->base();
    Param& mp = store.get(s.name);
    const auto tp_shape = s.tp_box.shape();
    bool aligned = tp_shape == mp.shape;
    for (size_t d = 0; aligned && d < tp_shape.size(); ++d)
      if (tp_shape[d] != s.full_shape[d])
        aligned = s.tp_box.begin[d] == mesh_.coord(Axis::tp) * tp_shape[d];
    if (!aligned)
      fail("tensor parallelism: " + s.name + " is split " + sp.layout.spec.str() + ", giving " +
           shape_str(tp_shape) + " per tp rank, but the model computes " + shape_str(mp.shape) +
           " (rows over tp for q/k/v/gate/up/embedding/lm_head and their lora_B, columns for "
           "o/down and their lora_A, norms and other adapter halves whole)");
    for (const auto& p : peers) s.peer_boxes.push_back(relative_to(p, s.tp_box));
    s.split_fsdp = s.box != s.tp_box;
    s.writer = sp.layout.replicas(rank).front() == rank;
    s.unit = unit_of(s.name, full_);
    s.model = &mp;
    s.gather_compute = mp.compute_offset >= 0;
    s.gather_master = mp.master_offset >= 0 && (!s.gather_compute || s.name == kEmbedName);
    // The adapter's down-projection A of a column-parallel layer (rows over tp) sees the whole
    // input but only this rank's rows of the output gradient: its gradient is a partial sum.
    const size_t lora_a = s.name.find(".lora_A.weight");
    if (shape.tp > 1 && lora_a != std::string::npos) {
      std::string base = s.name.substr(0, lora_a) + ".weight";
      if (base == "lm_head.weight" && full_.tie_word_embeddings) base = kEmbedName;
      const Param& bp = model_->base().get(base);
      const auto* bl = std::find_if(sharded.data(), sharded.data() + sharded.size(),
                                    [&](const ShardedParam& x) { return x.param.name == base; });
      s.partial_over_tp = bp.shape[0] != bl->param.shape[0];
    }
    (sp.param.adapter ? shard_adapters_ : shard_base_).add(s.name, s.box.shape(), plan_of(mp));
    slots_.push_back(std::move(s));
  }
  shard_base_.allocate();
  if (lora_.enabled) shard_adapters_.allocate();
  for (auto& s : slots_) {
    Param* p = const_cast<Param*>(shard_base_.find(s.name));
    if (!p) p = const_cast<Param*>(shard_adapters_.find(s.name));
    s.shard = p;
  }
  vocab_begin_ = slot(kEmbedName).tp_box.begin[0];
}

void ShardedModel::build_units() {
  for (int u = 0; u < num_units(); ++u) units_.push_back(std::make_unique<Unit>());
  for (auto& s : slots_) {
    if (!s.split_fsdp) continue;
    Unit& U = *units_[size_t(s.unit)];
    const int64_t local = s.box.numel(), whole = s.tp_box.numel();
    U.split.push_back(&s);
    U.chunk_compute.push_back(U.chunk);
    if (s.gather_compute) U.chunk += local;  // bf16: one uint16 unit per element
    U.chunk_master.push_back(U.chunk);
    if (s.gather_master) U.chunk += 2 * local;  // f32: two units
    U.compute_off.push_back(U.compute_elems);
    if (s.gather_compute) U.compute_elems += whole;
    U.master_off.push_back(U.master_elems);
    if (s.gather_master) U.master_elems += whole;
    U.grad_off.push_back(U.grad_elems);
    U.grad_chunk_off.push_back(U.grad_chunk);
    if (s.trainable) U.grad_elems += whole, U.grad_chunk += local;
  }
  for (auto& up : units_) {
    Unit& U = *up;
    if (U.split.empty()) continue;
    const char* expect = nullptr;
    bool contiguous = true;
    for (size_t i = 0; i < U.split.size() && contiguous; ++i) {
      const ShardSlot& s = *U.split[i];
      const int64_t n = s.box.numel();
      auto follow = [&](const void* p, int64_t bytes) {
        const char* c = static_cast<const char*>(p);
        if (expect && c != expect) contiguous = false;
        expect = c + bytes;
      };
      if (s.gather_compute) follow(s.shard->compute, n * 2);
      if (s.gather_master) follow(s.shard->master, n * 4);
    }
    const ShardSlot& first = *U.split.front();
    if (contiguous)
      U.direct_send = reinterpret_cast<const uint16_t*>(first.gather_compute ? static_cast<const void*>(first.shard->compute)
                                                                             : static_cast<const void*>(first.shard->master));
  }
}

void ShardedModel::point_model_at_shards() {
  for (auto& s : slots_) {
    if (s.split_fsdp) continue;  // pointed at a unit buffer while its unit is held
    s.model->master = s.shard->master;
    s.model->compute = s.shard->compute;
    s.model->grad = s.shard->grad;
  }
}

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
  for (size_t i = 0; i < U.split.size(); ++i) {
    ShardSlot& s = *U.split[i];
    const TensorBox whole = TensorBox::whole(s.tp_box.shape());
    for (int64_t f = 0; f < F; ++f) {
      const uint16_t* piece = U.recv + f * U.chunk;
      const TensorBox& pb = s.peer_boxes[size_t(f)];
      if (s.gather_compute)
        copy_box(reinterpret_cast<const bf16*>(piece + U.chunk_compute[i]), pb,
                 U.compute + U.compute_off[i], whole, pb);
      if (s.gather_master)
        copy_box(reinterpret_cast<const float*>(piece + U.chunk_master[i]), pb,
                 U.master + U.master_off[i], whole, pb);
    }
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
    for (int64_t f = 0; f < F; ++f)
      for (size_t i = 0; i < U.split.size(); ++i) {
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
      for (int64_t k = 0, n = s.box.numel(); k < n; ++k) dst[k] += src[k];
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

}  // namespace mt::dist
