#include "train/placed_model.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <unordered_map>

#include "core/crc32c.h"
#include "core/error.h"
#include "io/model_files.h"
#include "io/peft.h"
#include "io/peft_config.h"
#include "io/pretrained.h"
#include "model/param_shapes.h"
#include "model/vocab_growth.h"
#include "parallel/vocab_padding.h"
#include "train/added_vocab.h"
#include "train/run_agreement.h"
#include "train/run_layout.h"

namespace mt {

namespace {

// Counts over the data-parallel group; losses over it and the pipeline's stages (only the last
// stage's are not zero); gradients and their norm from the sharded model.
class ShardedSync final : public GradientSync {
 public:
  ShardedSync(parallel::DataParallel& dp, parallel::DataParallel& losses, parallel::ShardedModel& model)
      : dp_(dp), losses_(losses), model_(model) {}
  int64_t sum_count(int64_t local) override { return dp_.sum_count(local); }
  double sum_loss(double local) override { return losses_.sum_loss(local); }
  void sum_losses(double* values, int64_t n) override { losses_.sum_losses(values, n); }
  void begin_step(int64_t micro_batches) override { model_.begin_step(micro_batches); }
  void sum_gradients(ParamStore&) override { model_.finish_gradients(); }
  double grad_norm(const ParamStore&) override { return model_.grad_norm(); }

 private:
  parallel::DataParallel& dp_;
  parallel::DataParallel& losses_;
  parallel::ShardedModel& model_;
};

ModelConfig model_shape(const RunConfig& cfg, const Tokenizer& tok) {
  const auto& tc = cfg.train;
  // Checked against the weights' headers here too: a sharded model is allocated before it loads.
  ModelConfig shape = cfg.model_path.empty() ? cfg.model : checked_pretrained_config(cfg.model_path);
  const std::string where = cfg.model_path.empty() ? "model" : cfg.model_path;
  if (tc.seq_len > shape.max_position_embeddings)
    fail("train.seq_len (" + std::to_string(tc.seq_len) + ") exceeds max_position_embeddings (" +
         std::to_string(shape.max_position_embeddings) + ") of " + where);
  // data.add_tokens past the model's vocabulary grows it (train/added_vocab.h).
  shape.vocab_size = run_vocab_size(cfg, tok, shape.vocab_size, where);
  return shape;
}

}  // namespace

PlacedModel::PlacedModel(const RunConfig& cfg, parallel::Mesh& mesh, parallel::DataParallel& dp,
                         const Tokenizer& tok, std::ostream& log, Backend& backend)
    : cfg_(cfg), mesh_(mesh), dp_(dp), origin_{cfg.model_path, {true, tok.bos_id(), tok.eos_id()}} {
  const auto& tc = cfg.train;
  const ModelConfig shape = model_shape(cfg, tok);
  require_same_model(shape, cfg.lora, tok, mesh.world());  // before any weight moves
  for (const auto& p : llama_param_shapes(shape, cfg.lora)) {
    int64_t n = 1;
    for (int64_t d : p.shape) n *= d;
    if (!p.adapter) base_numel_ += n;
    if (p.adapter == cfg.lora.enabled) trainable_numel_ += n;
  }
  const parallel::MeshShape& m = mesh.shape();
  // Refused before any weight loads when the model cannot be split as asked.
  check_moe_layout(shape, m);
  check_moe_capacity(tc, shape);
  const parallel::PipelineSchedule schedule = parallel::parse_pipeline_schedule(tc.pp_schedule);
  const int chunks = int(tc.pp_virtual);
  const std::vector<int64_t> stage_blocks = run_stage_blocks(tc, shape, m);
  const int stage = int(mesh.coord(parallel::Axis::pp));
  // Sharded whenever anything splits a tensor or a stage: fsdp, tp, pp, cp (whose ranks hold
  // blocks over fsdp x cp, parallel/layout.h shard_spec) or ep (the experts); otherwise whole
  // replicas over dp.
  if (m.fsdp > 1 || m.tp > 1 || m.pp > 1 || m.cp > 1 || m.ep > 1) {
    sharded_ = std::make_unique<parallel::ShardedModel>(
        mesh, shape, tc.precision, cfg.lora, cfg.partition.effective(),
        m.pp > 1 ? parallel::stage_holds(shape, stage_blocks, stage, chunks) : std::vector<bool>{}, backend);
    // A vocabulary data.add_tokens grew past the file's gets its new rows as the loader reads
    // each block (the mean of the file's rows, as grow_vocabulary gives the whole model).
    if (cfg.model_path.empty()) sharded_->init_weights(tc.seed);
    else sharded_->load_weights(cfg.model_path, tc.seed, mesh.rank() == 0 ? &log : nullptr);
    sharded_->set_prefetch(tc.fsdp_prefetch);
    sharded_->set_sequence_parallel(tc.sequence_parallel);
    sharded_->set_dp_buckets(std::llround(double(tc.dp_bucket_mb) * 1e6));
    const std::string padding = parallel::vocab_padding_note(shape.vocab_size, m.tp);
    if (!padding.empty()) log << "tensor parallelism: " << padding << "\n";
  } else {
    if (!cfg.model_path.empty()) {
      whole_ = load_pretrained(cfg.model_path, tc.precision, cfg.lora, tc.seed, backend);
      // New rows for data.add_tokens' tokens past the model's vocabulary, the mean of the others.
      whole_ = grow_vocabulary(std::move(whole_), shape.vocab_size, tc.seed);
    } else {
      whole_ = std::make_unique<Transformer>(shape, tc.precision, cfg.lora, /*own_storage=*/true, backend);
      whole_->init_weights(tc.seed);
    }
  }
  model().set_activation_checkpointing(tc.activation_checkpointing);
  model().set_moe_capacity_factor(tc.moe_capacity_factor);
  // A mixture of experts' routing losses sum their statistics over every rank of the batch's tokens.
  if (dp_.sums()) model().set_token_sum([this](double* v, int64_t n) { dp_.tokens().all_reduce_sum(v, n); });
  if (m.cp > 1) {
    context_ = std::make_unique<parallel::ContextParallel>(mesh.axis(parallel::Axis::cp), backend);
    model().set_context_attention(context_.get());
  }
  if (m.pp > 1) {
    using parallel::Axis, parallel::axis_bit;
    pipeline_ = std::make_unique<parallel::Pipeline>(mesh.axis(Axis::pp), model(), stage_blocks, schedule,
                                                     chunks);
    stages_and_replicas_ = std::make_unique<parallel::DataParallel>(
        mesh.group(axis_bit(Axis::pp) | parallel::Mesh::token_axes()));
    log << "pipeline: " << m.pp << " stages, " << tc.pp_schedule
        << (chunks > 1 ? " interleaved (" + std::to_string(chunks) + " chunks per stage)" : "")
        << " schedule; rank 0 is "
        << pipeline_->describe_stage() << "\n";
  }
  if (sharded_) {
    sync_ = std::make_unique<ShardedSync>(dp_, stages_and_replicas_ ? *stages_and_replicas_ : dp_, *sharded_);
  } else if (dp_.sums()) {
    auto replica = std::make_unique<parallel::ReplicaGradients>(dp_, whole_->trainable(), whole_->config(),
                                                                std::llround(double(tc.dp_bucket_mb) * 1e6));
    whole_->set_parallel(replica.get());
    replica_ = replica.get();
    sync_ = std::move(replica);
  }
  if (!cfg.lora_init_adapter.empty()) load_initial_adapter(cfg.lora_init_adapter, cfg.lora, log);
  // Before any step: replicas that loaded different values would drift apart silently.
  require_equal_replicas("each rank loads model.path itself: give every rank the same files");
}

void PlacedModel::load_initial_adapter(const std::string& dir, const LoraConfig& lora, std::ostream& log) {
  const LoraConfig given = read_peft_config(dir);
  std::vector<std::string> a = given.targets, b = lora.targets;
  std::sort(a.begin(), a.end()), std::sort(b.begin(), b.end());
  const auto list = [](const std::vector<std::string>& v) {
    std::string s;
    for (const std::string& t : v) s += (s.empty() ? "" : ",") + t;
    return s;
  };
  if (given.rank != lora.rank || given.alpha != lora.alpha || a != b || given.rank_stabilized != lora.rank_stabilized ||
      given.train_router != lora.train_router) {
    std::ostringstream alpha;
    alpha << given.alpha;
    fail("lora.init_adapter " + dir + " is an adapter of r = " + std::to_string(given.rank) + ", alpha " + alpha.str() +
         " on [" + list(a) + "]" + (given.rank_stabilized ? " (rsLoRA)" : "") +
         (given.train_router ? " with the routers" : "") +
         ": give lora.rank, lora.alpha and lora.targets as it (the run trains that adapter further)");
  }
  check_peft_adapter(dir, full_config(), lora);
  if (sharded_) sharded_->load_adapter(dir);
  else load_peft_adapter(dir, *whole_);
  refresh_compute_copies();
  log << "adapters: from " << dir << "\n";
}

void PlacedModel::require_equal_replicas(const std::string& what, const std::vector<parallel::HeldBlock>& more) {
  std::vector<parallel::HeldBlock> blocks = held_blocks();
  blocks.insert(blocks.end(), more.begin(), more.end());
  parallel::require_equal_replicas(mesh_.world(), blocks, what);
}

std::vector<parallel::HeldBlock> PlacedModel::held_blocks() {
  std::vector<parallel::HeldBlock> out;
  if (mesh_.world().size() == 1) return out;
  std::vector<float> values;
  auto add = [&](const ParamStore& store, const Param& p, const TensorBox& box) {
    values.resize(size_t(p.numel));
    store.get_values(p, values.data());
    out.push_back({p.name, box, crc32c(values.data(), values.size() * sizeof(float))});
  };
  if (!sharded_) {
    for (ParamStore* store : {&whole_->base(), &whole_->adapters()})
      for (const Param& p : store->params()) add(*store, p, TensorBox::whole(p.shape));
    return out;
  }
  for (const parallel::ShardSlot& s : sharded_->slots()) {
    if (!s.shard || s.shard->numel == 0) continue;
    const bool base = sharded_->shard_base().find(s.name) == s.shard;
    add(base ? sharded_->shard_base() : sharded_->shard_adapters(), *s.shard, s.box);
  }
  return out;
}

PlacedModel::~PlacedModel() = default;

GradientSync* PlacedModel::sync() { return sync_.get(); }

std::string PlacedModel::describe_gradient_reduction() const {
  if (replica_) return replica_->describe();
  return sharded_ ? sharded_->describe_gradient_reduction() : std::string();
}

double PlacedModel::exposed_comm_seconds() const {
  if (replica_) return replica_->exposed_seconds();
  return sharded_ ? sharded_->exposed_comm_seconds() : 0.0;
}

void PlacedModel::reset_comm_stats() {
  if (sharded_) sharded_->reset_comm_stats();
  if (replica_) replica_->reset_stats();
  if (pipeline_) pipeline_->reset_total_timing();
}

std::vector<HeldTensor> PlacedModel::held_tensors(AdamW& optimizer) {
  if (!sharded_) {  // one rank, or equal replicas: the first writes them
    std::vector<HeldTensor> out = whole_tensors(whole_->trainable(), optimizer);
    for (HeldTensor& t : out) t.writer = mesh_.rank() == 0;
    return out;
  }
  std::vector<HeldTensor> out;  // every trainable tensor of the model, in its order
  for (const auto& p : llama_param_shapes(sharded_->full_config(), cfg_.lora)) {
    if (p.adapter != cfg_.lora.enabled) continue;
    if (!sharded_->holds(p.name)) {  // another pipeline stage's
      out.push_back({p.name, p.shape, {}, {}, {}, {}, false});
      continue;
    }
    const parallel::ShardSlot& s = sharded_->slot(p.name);
    Param& shard = *s.shard;
    // Without a padded vocabulary's rows: the true rows of a block are a prefix of it, and a block
    // of padding only holds nothing to save or load.
    const int64_t n = s.true_box.numel();
    if (n == 0) {
      out.push_back({p.name, p.shape, {}, {}, {}, {}, false});
      continue;
    }
    const auto prefix = [n](const Tensor& t) { return t.view(1, t.numel()).flat_slice(0, n); };
    out.push_back({s.name, s.true_shape, s.true_box, prefix(shard.master_tensor()), prefix(optimizer.exp_avg(shard)),
                   prefix(optimizer.exp_avg_sq(shard)), s.writer});
  }
  return out;
}

void PlacedModel::refresh_compute_copies() {
  if (!sharded_) return whole_->sync_compute_weights();
  sharded_->shard_base().sync_compute();
  sharded_->shard_adapters().sync_compute();
}

std::vector<std::string> PlacedModel::export_model(const std::string& dir) {
  const bool leader = mesh_.rank() == 0, lora = cfg_.lora.enabled;
  if (!sharded_) {
    if (!leader) return {};
    return lora ? save_peft_adapter(*whole_, dir, cfg_.model_path) : save_base_model(*whole_, dir, origin_);
  }
  std::vector<ExportTensor> tensors;  // in the model's order, the same on every rank
  std::unordered_map<std::string, int64_t> ep_owner;  // an expert's ep coordinate (others: 0)
  const ModelConfig& full = sharded_->full_config();
  const parallel::MeshShape& m = mesh_.shape();
  for (const auto& p : llama_param_shapes(full, cfg_.lora))
    if (p.adapter == lora) {
      tensors.push_back({p.name, p.shape});
      ep_owner[p.name] = p.expert >= 0 ? parallel::expert_owner(p.expert, p.experts, m.ep) : 0;
    }
  // Each tensor is gathered in the fsdp x cp x tp group of a stage (and, for an expert, the ep
  // coordinate) holding it; when that is not rank 0's, the group's first rank then sends it there.
  using parallel::Axis;
  const int stage = int(mesh_.coord(Axis::pp));
  const auto& c = mesh_.coords();
  const bool group_leader = c[size_t(Axis::dp)] == 0 && c[size_t(Axis::fsdp)] == 0 && c[size_t(Axis::tp)] == 0 &&
                            c[size_t(Axis::cp)] == 0;
  const FetchValues gather = [&](const std::string& name) {
    const int owner =
        pipeline_ ? parallel::stage_of_unit(pipeline_->blocks(), param_unit(name, full), pipeline_->chunks()) : 0;
    const int64_t expert_rank = ep_owner.at(name);
    std::vector<float> whole;
    if (sharded_->holds(name)) whole = sharded_->gather_whole(name);
    parallel::Coords from{};
    from[size_t(Axis::pp)] = owner, from[size_t(Axis::ep)] = expert_rank;
    const int source = int(parallel::rank_of(m, from));
    if (source == 0) return whole;
    constexpr int kExportTag = 4;
    int64_t n = 1;
    for (const auto& t : tensors)
      if (t.name == name)
        for (int64_t d : t.shape) n *= d;
    if (leader) {
      whole.resize(size_t(n));
      mesh_.world().recv_bytes(whole.data(), n * int64_t(sizeof(float)), source, kExportTag);
    } else if (owner == stage && group_leader && c[size_t(Axis::ep)] == expert_rank) {
      mesh_.world().send_bytes(whole.data(), n * int64_t(sizeof(float)), 0, kExportTag);
    }
    return whole;
  };
  if (!leader) {  // the same gathers, in the same order, as rank 0 makes while it writes
    for (const auto& t : tensors) gather(t.name);
    return {};
  }
  // A tied head's PEFT copy is written with the embedding copy's values (io/peft.cpp), which the
  // writer asks for twice: gathered once, as the other ranks gather it.
  std::vector<float> embed_copy;
  bool embed_copy_held = false;
  const FetchValues once = [&](const std::string& name) {
    if (name != kEmbedCopyName) return gather(name);
    if (!embed_copy_held) embed_copy = gather(name), embed_copy_held = true;
    return embed_copy;
  };
  return lora ? save_peft_adapter(cfg_.lora, tensors, once, dir, cfg_.model_path)
              : save_base_model(full, cfg_.train.precision, tensors, gather, dir, origin_);
}

}  // namespace mt
