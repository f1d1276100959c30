// The sharded model's layout: each parameter's block on this rank (from the partition rules),
// its tensor-parallel share, the shard stores, and how units are packed for their gathers.
#include "parallel/sharded_model.h"

#include <algorithm>

#include "core/error.h"
#include "core/shape_string.h"
#include "parallel/shard_plan.h"
#include "parallel/fsdp_units.h"
#include "parallel/vocab_padding.h"
#include "model/param_shapes.h"

namespace mt::parallel {

namespace {

TensorBox box_of(const TensorLayout& layout, int64_t rank) {
  TensorBox b;
  for (size_t d = 0; d < layout.shape.size(); ++d) {
    Range r = layout.range(rank, d);
    b.begin.push_back(r.begin), b.end.push_back(r.end);
  }
  return b;
}

// The blocks of `layout` on `coords`' shard peers (same coordinates except along fsdp and cp), in
// the order of Mesh::shard_group (fsdp major, cp minor).
std::vector<TensorBox> shard_peer_boxes(const TensorLayout& layout, const MeshShape& shape, Coords coords) {
  std::vector<TensorBox> peers;
  for (int64_t f = 0; f < shape.fsdp; ++f)
    for (int64_t c = 0; c < shape.cp; ++c) {
      coords[size_t(Axis::fsdp)] = f, coords[size_t(Axis::cp)] = c;
      peers.push_back(box_of(layout, rank_of(shape, coords)));
    }
  return peers;
}

// The union of the shard peers' blocks: the rank's tensor-parallel share, which the model computes with.
TensorBox tp_share(const std::vector<TensorBox>& peers) {
  TensorBox share = peers[0];
  for (const auto& p : peers)
    for (size_t d = 0; d < p.rank(); ++d) {
      share.begin[d] = std::min(share.begin[d], p.begin[d]);
      share.end[d] = std::max(share.end[d], p.end[d]);
    }
  return share;
}

TensorBox relative_to(const TensorBox& b, const TensorBox& origin) {
  TensorBox r = b;
  for (size_t d = 0; d < b.rank(); ++d) r.begin[d] -= origin.begin[d], r.end[d] -= origin.begin[d];
  return r;
}

ParamPlan plan_of(const Param& p) {
  return ParamPlan{p.master_offset >= 0, p.compute_offset >= 0, p.grad_offset >= 0, p.decay,
                   p.quant_offset >= 0};
}

}  // namespace

ShardedModel::ShardedModel(Mesh& mesh, const ModelConfig& full, Precision precision,
                           const LoraConfig& lora, const PartitionRules& rules,
                           std::vector<bool> held_units, Backend& backend)
    : mesh_(mesh), full_(full), precision_(precision), lora_(lora), backend_(backend),
      shard_base_(backend), shard_adapters_(backend), held_units_(std::move(held_units)), pool_(backend) {
  if (held_units_.empty()) held_units_.assign(size_t(num_units()), true);
  MT_CHECK(int(held_units_.size()) == num_units(), "one held flag per unit");
  local_ = expert_parallel_config(tensor_parallel_config(full_, mesh_.shape().tp, mesh_.coord(Axis::tp)),
                                  mesh_.shape().ep, mesh_.coord(Axis::ep));
  model_ = std::make_unique<Transformer>(local_, precision_, lora_, /*own_storage=*/false, backend);
  if (mesh_.shape().tp > 1)
    tp_ = std::make_unique<TensorParallelGroup>(mesh_.axis(Axis::tp), backend);
  if (mesh_.shape().ep > 1)
    ep_ = std::make_unique<ExpertParallelGroup>(mesh_.axis(Axis::ep), backend);
  build_slots(rules);
  build_units();
  point_model_at_shards();
  set_dp_buckets(0);
  model_->set_parallel(this);
}

ShardedModel::~ShardedModel() {
  for (auto& s : scatters_)
    if (s->request) s->request->wait();
  for (auto& u : units_)
    if (u->gathering) u->gather->wait();
}

const ShardSlot& ShardedModel::slot(const std::string& name) const {
  const auto it = slot_index_.find(name);
  if (it == slot_index_.end()) fail("no parameter named '" + name + "' on this rank");
  return slots_[it->second];
}

void check_rank_block(const ShardedParam& sp, const MeshShape& shape, int64_t rank) {
  const std::string& name = sp.param.name;
  const TensorBox box = box_of(sp.layout, rank);
  // The shard (fsdp x cp) peers' blocks must tile this rank's tensor-parallel share, which is what
  // the model computes with.
  const std::vector<TensorBox> peers = shard_peer_boxes(sp.layout, shape, coords_of(shape, rank));
  const TensorBox share = tp_share(peers);
  int64_t tiled = 0;
  for (const auto& p : peers) tiled += p.numel();
  if (shape.shards() > 1 && tiled != share.numel() && share != box)
    fail("partition rules: the fsdp" + std::string(shape.cp > 1 ? " x cp" : "") + " blocks of " + name + " (" + sp.layout.spec.str() +
         ") do not tile its tensor-parallel share; list tp before fsdp on a dimension both split");
  if (!sp.nf4) return;
  if (box.begin[1] != share.begin[1] || box.end[1] != share.end[1])
    fail("lora.base_dtype = \"nf4\": fsdp (and cp) must split " + name + " between rows (see nf4_base_rules)");
  if (!nf4::slice_keeps_groups(sp.param.shape[1], box.begin[1], box.end[1]))
    fail("lora.base_dtype = \"nf4\": tp splits the " + std::to_string(sp.param.shape[1]) + " columns of " + name +
         " into " + std::to_string(box.end[1] - box.begin[1]) +
         ", which cuts an NF4 block of 64 or a double-quantisation group of the row; use a tp that "
         "leaves whole blocks (columns / tp a multiple of 64) and groups (see docs/qlora.md)");
}

void ShardedModel::build_slots(const PartitionRules& rules) {
  const MeshShape& shape = mesh_.shape();
  const int64_t rank = mesh_.rank();
  const auto sharded = shard_params(laid_out_shapes(llama_param_shapes(full_, lora_), shape.tp),
                                    lora_.enabled, rules, shape, lora_.quantized_base());
  for (const ShardedParam& sp : sharded) {
    if (!held_units_[size_t(param_unit(sp.param.name, full_))] || !sp.layout.held_by(rank)) continue;
    ShardSlot s;
    s.name = sp.param.name;
    s.layout = sp.layout;
    s.full_shape = sp.param.shape;
    s.trainable = sp.trainable;
    s.expert = sp.layout.ep_owner >= 0;
    check_rank_block(sp, shape, rank);
    s.box = box_of(sp.layout, rank);
    const std::vector<TensorBox> peers = shard_peer_boxes(sp.layout, shape, mesh_.coords());
    s.tp_box = tp_share(peers);
    ParamStore& store = sp.param.adapter ? model_->adapters() : model_->base();
    Param& mp = store.get(s.name);
    s.true_shape = s.full_shape;
    s.true_box = s.box;
    const auto tp_shape = s.tp_box.shape();
    auto computed = tp_shape;  // what the model holds of the share: its true vocabulary rows only
    if (has_vocab_rows(s.name)) {
      const int64_t V = full_.vocab_size;
      s.true_shape[0] = V;
      s.true_box.begin[0] = std::min(s.box.begin[0], V), s.true_box.end[0] = std::min(s.box.end[0], V);
      computed[0] = std::min(s.tp_box.end[0], V) - s.tp_box.begin[0];
    }
    bool aligned = computed == mp.shape;
    for (size_t d = 0; aligned && d < tp_shape.size(); ++d)
      if (tp_shape[d] != s.full_shape[d])
        aligned = s.tp_box.begin[d] == mesh_.coord(Axis::tp) * tp_shape[d];
    if (!aligned)
      fail("tensor parallelism: " + s.name + " is split " + sp.layout.spec.str() + ", giving " +
           shape_string(tp_shape) + " per tp rank, but the model computes " + shape_string(mp.shape) +
           " (rows over tp for q/k/v/gate/up/embedding/lm_head and their lora_B, columns for "
           "o/down and their lora_A, norms and other adapter halves whole)");
    for (const auto& p : peers) s.peer_boxes.push_back(relative_to(p, s.tp_box));
    s.split_fsdp = s.box != s.tp_box;
    s.unit = param_unit(s.name, full_);
    // The first replica of this block within this stage writes it; the first stage writes a tied
    // embedding the last stage holds too.
    const int64_t stage = mesh_.coord(Axis::pp);
    for (int64_t r : sp.layout.replicas(rank))
      if (coords_of(shape, r)[size_t(Axis::pp)] == stage) {
        s.writer = r == rank && (s.unit != 0 || stage == 0);
        break;
      }
    s.model = &mp;
    s.gather_compute = mp.compute_offset >= 0;
    // The lookups read an embedding's f32 master (model/weights.cpp bind_embedding), a trained
    // copy's (lora.train_embeddings) too.
    s.gather_master = mp.master_offset >= 0 && (!s.gather_compute || s.name == kEmbedName || s.name == kEmbedCopyName);
    s.gather_quant = mp.quant_offset >= 0;
    // The adapter's down-projection A of a column-parallel layer (rows over tp) sees the whole
    // input but only this rank's rows of the output gradient: its gradient is a partial sum.
    const size_t lora_a = s.name.find(".lora_A.weight");
    if (shape.tp > 1 && lora_a != std::string::npos) {
      std::string base = s.name.substr(0, lora_a) + ".weight";
      if (base == "lm_head.weight" && full_.tie_word_embeddings) base = kEmbedName;
      const size_t fused = base.find("self_attn.c_attn.");  // GPT-2's shared A: q, k and v's rows
      if (fused != std::string::npos) base = base.substr(0, fused) + "self_attn.q_proj.weight";
      const Param& bp = model_->base().get(base);
      const auto* bl = std::find_if(sharded.data(), sharded.data() + sharded.size(),
                                    [&](const ShardedParam& x) { return x.param.name == base; });
      s.partial_over_tp = bp.shape[0] != bl->param.shape[0];
    }
    (sp.param.adapter ? shard_adapters_ : shard_base_).add(s.name, s.box.shape(), plan_of(mp));
    slot_index_[s.name] = slots_.size();
    slots_.push_back(std::move(s));
  }
  shard_base_.allocate();
  if (lora_.enabled) shard_adapters_.allocate();
  for (auto& s : slots_) {
    Param* p = const_cast<Param*>(shard_base_.find(s.name));
    if (!p) p = const_cast<Param*>(shard_adapters_.find(s.name));
    s.shard = p;
  }
  // The vocabulary rows of this tp rank's share (its shard peers' blocks together), which stages
  // without the embedding need too when they hold the head.
  const ShardedParam& embed = *std::find_if(sharded.begin(), sharded.end(),
                                            [](const ShardedParam& x) { return x.param.name == kEmbedName; });
  vocab_begin_ = embed.layout.shape[0];
  int64_t vocab_end = 0;
  for (const TensorBox& b : shard_peer_boxes(embed.layout, shape, mesh_.coords()))
    vocab_begin_ = std::min(vocab_begin_, b.begin[0]), vocab_end = std::max(vocab_end, b.end[0]);
  vocab_share_rows_ = vocab_end - vocab_begin_;
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
    U.chunk_quant.push_back(U.chunk);
    if (s.gather_quant) U.chunk += s.box.shape()[0] * s.words_per_row();
    U.quant_off.push_back(U.quant_words);
    if (s.gather_quant) U.quant_words += s.tp_box.shape()[0] * s.words_per_row();
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
      if (s.gather_quant) follow(s.shard->quant, int64_t(s.shard->quant_tensor().bytes()));
    }
    const ShardSlot& first = *U.split.front();
    if (contiguous)
      U.direct_send = reinterpret_cast<const uint16_t*>(first.gather_compute ? static_cast<const void*>(first.shard->compute)
                                                        : first.gather_quant ? static_cast<const void*>(first.shard->quant)
                                                                             : static_cast<const void*>(first.shard->master));
  }
}

int64_t ShardSlot::words_per_row() const { return nf4::row_bytes(box.shape()[1]) / 2; }

void ShardedModel::point_model_at_shards() {
  for (auto& s : slots_) {
    if (s.split_fsdp) continue;  // pointed at a unit buffer while its unit is held
    s.model->master = s.shard->master;
    s.model->compute = s.shard->compute;
    s.model->quant = s.shard->quant;
    s.model->grad = s.shard->grad;
  }
}

void ShardedModel::set_sequence_parallel(bool on) {
  sequence_parallel_ = on && tp_ != nullptr;
  for (ShardSlot& s : slots_)
    if (sequence_split_gradient(s.name)) s.partial_over_tp = sequence_parallel_;
}

int64_t ShardedModel::sequence_shards() const { return sequence_parallel_ ? mesh_.shape().tp : 1; }
int64_t ShardedModel::sequence_shard() const { return sequence_parallel_ ? mesh_.coord(Axis::tp) : 0; }

}  // namespace mt::parallel
