#include "train/placed_model.h"

#include "core/error.h"
#include "io/model_files.h"
#include "io/peft.h"
#include "io/pretrained.h"
#include "model/param_shapes.h"
#include "train/run_agreement.h"

namespace mt {

namespace {

// Counts, losses over the data-parallel group; gradients and their norm from the sharded model.
class ShardedSync final : public GradientSync {
 public:
  ShardedSync(parallel::DataParallel& dp, parallel::ShardedModel& model) : dp_(dp), model_(model) {}
  int64_t sum_count(int64_t local) override { return dp_.sum_count(local); }
  double sum_loss(double local) override { return dp_.sum_loss(local); }
  void sum_gradients(ParamStore&) override { model_.finish_gradients(); }
  double grad_norm(const ParamStore&) override { return model_.grad_norm(); }

 private:
  parallel::DataParallel& dp_;
  parallel::ShardedModel& model_;
};

// Pipeline stages: counts over the data-parallel group (each stage sees the same rows); losses
// (the last stage's) and gradients (each stage's own units, zero elsewhere) summed over pp x dp,
// which leaves every rank with the whole gradient, so the replicated norm is the global one.
class PipelineSync final : public GradientSync {
 public:
  PipelineSync(parallel::DataParallel& dp, parallel::DataParallel& stages_and_replicas)
      : dp_(dp), all_(stages_and_replicas) {}
  int64_t sum_count(int64_t local) override { return dp_.sum_count(local); }
  double sum_loss(double local) override { return all_.sum_loss(local); }
  void sum_gradients(ParamStore& params) override { all_.sum_gradients(params); }
  double grad_norm(const ParamStore& params) override { return all_.grad_norm(params); }

 private:
  parallel::DataParallel& dp_;
  parallel::DataParallel& all_;
};

LlamaConfig model_shape(const RunConfig& cfg, const Tokenizer& tok) {
  const auto& tc = cfg.train;
  // Checked against the weights' headers here too: a sharded model is allocated before it loads.
  const LlamaConfig shape = cfg.model_path.empty() ? cfg.model : checked_pretrained_config(cfg.model_path);
  const std::string where = cfg.model_path.empty() ? "model" : cfg.model_path;
  if (tc.seq_len > shape.max_position_embeddings)
    fail("train.seq_len (" + std::to_string(tc.seq_len) + ") exceeds max_position_embeddings (" +
         std::to_string(shape.max_position_embeddings) + ") of " + where);
  if (tok.vocab_size() > shape.vocab_size)
    fail("the " + std::string(tok.kind()) + " tokenizer has " + std::to_string(tok.vocab_size()) +
         " tokens but " + where + " has vocab_size " + std::to_string(shape.vocab_size) +
         (cfg.model_path.empty() && tok.kind() == "byte" ? " (the byte-level tokenizer needs 256)" : ""));
  return shape;
}

}  // namespace

PlacedModel::PlacedModel(const RunConfig& cfg, parallel::Mesh& mesh, parallel::DataParallel& dp,
                         const Tokenizer& tok, std::ostream& log)
    : cfg_(cfg), mesh_(mesh), dp_(dp), origin_{cfg.model_path, {true, tok.bos_id(), tok.eos_id()}} {
  const auto& tc = cfg.train;
  const LlamaConfig shape = model_shape(cfg, tok);
  require_same_model(shape, cfg.lora, tok, mesh.world());  // before any weight moves
  for (const auto& p : llama_param_shapes(shape, cfg.lora)) {
    int64_t n = 1;
    for (int64_t d : p.shape) n *= d;
    if (!p.adapter) base_numel_ += n;
    if (p.adapter == cfg.lora.enabled) trainable_numel_ += n;
  }
  const parallel::MeshShape& m = mesh.shape();
  // Refused before any weight loads when the model cannot be split as asked.
  const parallel::PipelineSchedule schedule = parallel::parse_pipeline_schedule(tc.pp_schedule);
  const int chunks = int(tc.pp_virtual);
  parallel::check_virtual_stages(schedule, int(m.pp), chunks, tc.grad_accum);
  const std::vector<int64_t> stage_blocks =
      m.pp > 1 ? parallel::pipeline_blocks(shape, m.pp * chunks, tc.pp_blocks, chunks) : std::vector<int64_t>{};
  if (m.fsdp > 1 || m.tp > 1) {
    sharded_ = std::make_unique<parallel::ShardedModel>(mesh, shape, tc.precision, cfg.lora,
                                                    cfg.partition.effective());
    if (cfg.model_path.empty()) sharded_->init_weights(tc.seed);
    else sharded_->load_weights(cfg.model_path, tc.seed, mesh.rank() == 0 ? &log : nullptr);
    sharded_->set_prefetch(tc.fsdp_prefetch);
    sync_ = std::make_unique<ShardedSync>(dp_, *sharded_);
  } else {
    if (!cfg.model_path.empty()) {
      whole_ = load_pretrained(cfg.model_path, tc.precision, cfg.lora, tc.seed);
    } else {
      whole_ = std::make_unique<LlamaModel>(shape, tc.precision, cfg.lora);
      whole_->init_weights(tc.seed);
    }
  }
  model().set_activation_checkpointing(tc.activation_checkpointing);
  if (m.pp > 1) {
    using parallel::Axis, parallel::axis_bit;
    pipeline_ = std::make_unique<parallel::Pipeline>(
        mesh.axis(Axis::pp), *whole_, stage_blocks, schedule, chunks);
    stages_and_replicas_ =
        std::make_unique<parallel::DataParallel>(mesh.group(axis_bit(Axis::pp) | axis_bit(Axis::dp)));
    sync_ = std::make_unique<PipelineSync>(dp_, *stages_and_replicas_);
    log << "pipeline: " << m.pp << " stages, " << tc.pp_schedule
        << (chunks > 1 ? " interleaved (" + std::to_string(chunks) + " chunks per stage)" : "")
        << " schedule; rank 0 is "
        << pipeline_->describe_stage() << "\n";
  }
}

PlacedModel::~PlacedModel() = default;

GradientSync* PlacedModel::sync() {
  if (sync_) return sync_.get();
  return dp_.ranks() > 1 ? &dp_ : nullptr;
}

std::vector<HeldTensor> PlacedModel::held_tensors(AdamW& optimizer) {
  if (pipeline_) {  // every rank holds equal replicas: each stage's first dp rank writes its units
    std::vector<HeldTensor> out = whole_tensors(whole_->trainable(), optimizer);
    for (HeldTensor& t : out) t.writer = dp_.rank() == 0 && pipeline_->holds(t.name);
    return out;
  }
  if (!sharded_) return whole_tensors(whole_->trainable(), optimizer);
  std::vector<HeldTensor> out;
  for (const auto& s : sharded_->slots()) {
    if (!s.trainable) continue;
    Param& p = *s.shard;
    out.push_back({s.name, s.full_shape, s.box, p.master, optimizer.m() + p.grad_offset,
                   optimizer.v() + p.grad_offset, s.writer});
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
  for (const auto& s : sharded_->slots())
    if ((s.name.find(".lora_") != std::string::npos) == lora) tensors.push_back({s.name, s.full_shape});
  const FetchValues gather = [&](const std::string& name) { return sharded_->gather_whole(name); };
  if (!leader) {  // the same gathers, in the same order, as rank 0 makes while it writes
    for (const auto& t : tensors) gather(t.name);
    return {};
  }
  return lora ? save_peft_adapter(cfg_.lora, tensors, gather, dir, cfg_.model_path)
              : save_base_model(sharded_->full_config(), cfg_.train.precision, tensors, gather, dir, origin_);
}

}  // namespace mt
