#include "model/transformer.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "backend/device_buffer.h"
#include "core/error.h"
#include "core/profile.h"
#include "core/rope_frequencies.h"
#include "core/token_ids.h"
#include "core/normal_init.h"
#include "model/param_shapes.h"
#include "model/weights.h"

namespace mt {

std::string layer_prefix(int64_t layer) { return "model.layers." + std::to_string(layer) + "."; }

int param_unit(const std::string& name, const ModelConfig& config) {
  const std::string layers = "model.layers.";
  if (name.rfind(layers, 0) == 0) return std::stoi(name.substr(layers.size())) + 1;
  if (name == kEmbedName || name == kPositionEmbedName || name == kEmbedCopyName) return 0;
  if (name.rfind("lm_head.", 0) == 0 && config.tie_word_embeddings) return 0;
  return int(config.num_hidden_layers) + 1;
}

std::string proj_param_name(int64_t layer, Proj p) {
  const char* attn = "self_attn.";
  const char* mlp = "mlp.";
  return layer_prefix(layer) + (p <= kO ? attn : mlp) + proj_name(p) + "_proj";
}

const char* mlp_norm_name(const ModelConfig& config) {
  return config.post_norms ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight";
}

std::string moe_router_name(int64_t layer, const ModelConfig& c) {
  return layer_prefix(layer) + (c.model_type == "mixtral" ? "block_sparse_moe" : "mlp") + ".gate.weight";
}

std::string expert_param_name(int64_t layer, int64_t expert, ExpertProj p, const ModelConfig& c) {
  const bool mixtral = c.model_type == "mixtral";
  static const char* mixtral_names[kNumExpertProj] = {"w1", "w3", "w2"};
  static const char* names[kNumExpertProj] = {"gate_proj", "up_proj", "down_proj"};
  return layer_prefix(layer) + (mixtral ? "block_sparse_moe" : "mlp") + ".experts." + std::to_string(expert) +
         "." + (mixtral ? mixtral_names[p] : names[p]);
}

namespace {
constexpr const char* kRouterCopyTail = ".gate.modules_to_save.weight";
}  // namespace

std::string moe_router_copy_name(int64_t layer, const ModelConfig& c) {
  const std::string router = moe_router_name(layer, c);  // "....gate.weight"
  return router.substr(0, router.size() - std::strlen(".weight")) + ".modules_to_save.weight";
}

bool moe_router_copy_param(const std::string& name) { return name.ends_with(kRouterCopyTail); }

std::string router_of_copy(const std::string& copy) {
  MT_CHECK(moe_router_copy_param(copy), copy + " is not a router's copy");
  return copy.substr(0, copy.size() - std::strlen(kRouterCopyTail)) + ".gate.weight";
}

bool embedding_copy_param(const std::string& name) { return name == kEmbedCopyName || name == kHeadCopyName; }

std::string module_of_copy(const std::string& copy) {
  const std::string tail = ".modules_to_save.weight";
  MT_CHECK(copy.ends_with(tail), copy + " is not a module's copy");
  return copy.substr(0, copy.size() - tail.size()) + ".weight";
}

bool moe_router_param(const std::string& name) {
  const std::string tail = ".gate.weight";
  return name.size() > tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
}

std::string head_norm_name(int64_t layer, Proj p) {
  return layer_prefix(layer) + "self_attn." + proj_name(p) + "_norm.weight";
}

std::array<bool, kNumProj> lora_targets_mask(const LoraConfig& lora) {
  std::array<bool, kNumProj> on{};
  if (!lora.enabled) return on;
  for (const auto& t : lora.targets) {
    for (int p = 0; p < kNumProj; ++p)
      if (t == proj_name(Proj(p))) on[p] = true;
    if (t == "c_attn") on[kQ] = on[kK] = on[kV] = true;
    if (t == "c_proj") on[kO] = on[kDown] = true;
    if (t == "c_fc") on[kUp] = true;
  }
  return on;
}

bool lora_fuses_qkv(const LoraConfig& lora) {
  return lora.enabled && std::find(lora.targets.begin(), lora.targets.end(), "c_attn") != lora.targets.end();
}

std::string lora_a_name(int64_t layer, Proj p, const LoraConfig& lora) {
  if (p <= kV && lora_fuses_qkv(lora)) return layer_prefix(layer) + "self_attn.c_attn.lora_A.weight";
  return proj_param_name(layer, p) + ".lora_A.weight";
}

bool lora_targets_head(const LoraConfig& lora) {
  return lora.enabled && std::find(lora.targets.begin(), lora.targets.end(), "lm_head") !=
                             lora.targets.end();
}

// ---------------------------------------------------------------------------------------------
// Parameter declaration

Transformer::Transformer(const ModelConfig& config, Precision precision, const LoraConfig& lora,
                       bool own_storage, Backend& backend)
    : config_(config), precision_(precision), backend_(backend), lora_(lora), base_(backend),
      adapters_(backend) {
  config_.validate();
  const bool bf = precision == Precision::bf16;
  const bool frozen = lora.enabled;
  ParamPlan matrix{/*master=*/!bf || !frozen, /*compute=*/bf, /*grad=*/!frozen, /*decay=*/true};
  ParamPlan norm{true, false, !frozen, false};
  // The lookup reads the f32 master of a trained embedding; a frozen one under bf16 is kept (and
  // gathered under fsdp) in bf16 only, like the frozen matrices: the lookup widens its rows, and
  // a tied head's GEMMs read the same copy.
  ParamPlan embed{!bf || !frozen, bf && (config.tie_word_embeddings || frozen), !frozen, true};
  ParamPlan positions{!bf || !frozen, bf && frozen, !frozen, true};  // a lookup: a copy only if frozen
  ParamPlan adapter{true, bf, true, true};
  ParamPlan nf4_base{false, false, false, true, /*quant=*/true};
  // One list of names and shapes serves the model, the shard planner and the memory planner.
  for (const ParamShape& p : llama_param_shapes(config_, lora)) {
    if (p.adapter) adapters_.add(p.name, p.shape, adapter);
    else if (p.shape.size() == 1) base_.add(p.name, p.shape, norm);
    else if (p.name == kEmbedName) base_.add(p.name, p.shape, embed);
    else if (p.name == kPositionEmbedName) base_.add(p.name, p.shape, positions);
    // QLoRA quantises the blocks' projections; the embedding and the head stay as they are.
    else if (lora.quantized_base() && quantized_in_qlora(p)) base_.add(p.name, p.shape, nf4_base);
    else base_.add(p.name, p.shape, matrix);
  }
  base_.allocate(own_storage);
  if (lora.enabled) adapters_.allocate(own_storage);
}

Transformer::~Transformer() = default;

// Values are drawn on the host (they depend only on seed and name) and uploaded.
void Transformer::init_weights(uint64_t seed) {
  MT_CHECK(owns_storage(), "init_weights on a model whose parameters live in a parallel layer");
  std::vector<float> tmp;
  for (auto& p : base_.params()) {
    // Norms start as the identity (weights one, or zero under Gemma's 1 + w), biases at zero (as
    // HF initialises both), matrices N(0, 0.02).
    const bool is_bias = p.name.size() > 5 && p.name.compare(p.name.size() - 5, 5, ".bias") == 0;
    tmp.assign(size_t(p.numel), is_bias ? 0.0f : 1.0f - config_.norm_weight_offset);
    if (p.shape.size() != 1) fill_normal(tmp.data(), p.numel, 0.02f, seed, p.name);
    base_.set_values(p, tmp.data());
  }
  init_adapters(seed);
}

void Transformer::init_adapters(uint64_t seed) {
  MT_CHECK(owns_storage(), "init_adapters on a model whose parameters live in a parallel layer");
  std::vector<float> tmp;
  for (auto& p : adapters_.params()) {
    tmp.assign(size_t(p.numel), 0.0f);
    if (p.name.find("lora_A") != std::string::npos)
      fill_normal(tmp.data(), p.numel, lora_.init_std, seed, p.name);
    if (moe_router_copy_param(p.name)) base_.get_values(base_.get(router_of_copy(p.name)), tmp.data());
    if (embedding_copy_param(p.name)) base_.get_values(base_.get(module_of_copy(p.name)), tmp.data());
    adapters_.set_values(p, tmp.data());
  }
}

void Transformer::set_moe_capacity_factor(float factor) {
  if (factor == config_.moe_capacity_factor) return;
  MT_CHECK(config_.moe(), "a capacity factor for a dense model (the trainer refuses it: check_moe_capacity)");
  ModelConfig c = config_;
  c.moe_capacity_factor = factor;
  c.validate();  // its range
  config_ = c;
  runner_.reset();  // its arenas hold the experts' rows the factor allows (moe_expert_rows): planned again
}

void Transformer::sync_compute_weights() {
  base_.sync_compute();
  adapters_.sync_compute();
}

// W += scale B A (alpha/r, or alpha/sqrt(r) for rsLoRA) in f32 on the device; a bf16-only base is widened, merged and rounded once.
void Transformer::merge_adapters() {
  if (!lora_.enabled) return;
  MT_CHECK(owns_storage(), "merge_adapters on a model whose parameters live in a parallel layer");
  Backend& be = backend_;
  const float scale = lora_.scale();
  auto merge = [&](const std::string& base_name, const std::string& prefix, const std::string& a_name) {
    Param& W = base_.get(base_name);
    if (W.quant) fail("merge: " + base_name + " is NF4; merge into a bf16 base after round_trip_nf4()");
    const Param& A = adapters_.get(a_name);
    Param& B = adapters_.get(prefix + ".lora_B.weight");
    const int64_t out = W.shape[0], in = W.shape[1];
    DeviceBuffer delta(be, DType::f32, out * in), widened;
    const Tensor d = delta.tensor().view(out, in);
    be.matmul(d, B.master_tensor(), false, A.master_tensor(), false, scale, false);
    Tensor merged = W.master_tensor();
    if (!merged) {
      widened.resize(be, DType::f32, out * in);
      merged = widened.tensor().view(out, in);
      be.convert(merged, W.quant ? W.quant_tensor() : W.compute_tensor());
    }
    be.add(merged, d);
    if (W.compute) be.convert(W.compute_tensor(), merged);
    be.fill(B.master_tensor(), 0.0f);
  };
  auto on = lora_targets_mask(lora_);
  for (int64_t l = 0; l < config_.num_hidden_layers; ++l)
    for (int p = 0; p < kNumProj; ++p) {
      if (!on[p] || !proj_exists(Proj(p), config_)) continue;
      // On a mixture-of-experts layer gate, up and down are the experts' (each its own adapter,
      // model/param_shapes.cpp), not a dense MLP's.
      if (config_.moe_layer(l) && p >= kGate) {
        for (int64_t e = 0; e < config_.num_experts; ++e) {
          const std::string name = expert_param_name(l, e, ExpertProj(p - kGate), config_);
          merge(name + ".weight", name, name + ".lora_A.weight");
        }
        continue;
      }
      merge(proj_param_name(l, Proj(p)) + ".weight", proj_param_name(l, Proj(p)), lora_a_name(l, Proj(p), lora_));
    }
  if (lora_targets_head(lora_))
    merge(config_.tie_word_embeddings ? kEmbedName : kHeadName, "lm_head", "lm_head.lora_A.weight");
  // A trained router's or embedding's copy becomes the module, as PEFT's merge_and_unload puts
  // the copy in the original module's place (a tied head is the embedding's).
  std::vector<float> values;
  for (const Param& p : adapters_.params()) {
    if (!moe_router_copy_param(p.name) && !embedding_copy_param(p.name)) continue;
    values.resize(size_t(p.numel));
    adapters_.get_values(p, values.data());
    base_.set_values(base_.get(module_of_copy(p.name)), values.data());
  }
  adapters_.sync_compute();
}

void Transformer::round_trip_nf4() {
  MT_CHECK(owns_storage(), "round_trip_nf4 on a model whose parameters live in a parallel layer");
  for (auto& p : base_.params()) {
    if (!quantized_in_qlora({p.name, p.shape, false}) || p.quant) continue;
    const int64_t rows = p.shape[0], cols = p.shape[1];
    std::vector<float> values(size_t(p.numel));
    base_.get_values(p, values.data());
    DeviceBuffer f32(backend_, DType::f32, p.numel), packed(backend_, DType::i32, int64_t(nf4::tensor_bytes(rows, cols) / 4));
    const Tensor whole = f32.tensor().view(rows, cols), q = backend_.view(packed.data(), DType::nf4, rows, cols);
    backend_.copy_from_host(whole, values.data());
    backend_.convert(q, whole);
    backend_.convert(whole, q);
    backend_.copy_to_host(values.data(), whole);
    base_.set_values(p, values.data());
  }
}

// ---------------------------------------------------------------------------------------------
// The runner: weight views, the activation arena, and the forward and backward over them.

// A parallel layer's hooks with the rows whole: the passes whose rows do not divide over the
// sequence-parallel ranks (an evaluation's last, partial batch) run as tensor parallelism alone.
class WholeRows final : public ModelParallel {
 public:
  explicit WholeRows(ModelParallel& layer) : layer_(layer) {}
  void acquire(int unit, bool grads, bool weights) override { layer_.acquire(unit, grads, weights); }
  void release(int unit, bool grads) override { layer_.release(unit, grads); }
  void reduce_sum(const Tensor& partial) override { layer_.reduce_sum(partial); }
  void reduce_max(const Tensor& partial) override { layer_.reduce_max(partial); }
  bool splits_vocabulary() const override { return layer_.splits_vocabulary(); }
  int64_t vocab_begin() const override { return layer_.vocab_begin(); }
  int64_t vocab_size() const override { return layer_.vocab_size(); }
  int64_t vocab_share_rows() const override { return layer_.vocab_share_rows(); }
  int64_t input_column_begin(const std::string& name) const override { return layer_.input_column_begin(name); }

 private:
  ModelParallel& layer_;
};

namespace {

// Rows [begin, begin + rows) of a chunk whose tokens share one loss-gradient weight.
struct WeightRun {
  int64_t begin = 0, rows = 0;
  float weight = 1.0f;
};

// The chunk of rows [n0, n0 + M) as maximal runs of equal weight (ModelInput::token_weights);
// one run of weight 1 without weights.
std::vector<WeightRun> weight_runs(const float* weights, int64_t n0, int64_t M) {
  if (!weights) return {{0, M, 1.0f}};
  std::vector<WeightRun> runs;
  for (int64_t i = 0; i < M; ++i) {
    if (runs.empty() || weights[n0 + i] != runs.back().weight) runs.push_back({i, 0, weights[n0 + i]});
    ++runs.back().rows;
  }
  return runs;
}

}  // namespace

class Transformer::Runner {
 public:
  explicit Runner(Transformer& m)
      : m_(m), c_(m.config()), be_(m.backend()), ct_(m.compute_dtype()), par_(m.parallel()),
        hooks_(par_ ? *par_ : single_device()), whole_rows_(hooks_), pass_(&hooks_),
        w_(par_ ? ModelWeights{} : bind_model_weights(m)),
        lora_on_(lora_targets_mask(m.lora_config())),
        lora_rank_(m.has_lora() ? m.lora_config().rank : 0),
        lora_dropout_(m.has_lora() ? m.lora_config().dropout : 0.0f) {
    const int64_t L = c_.num_hidden_layers;
    blocks_ = m.units().empty() ? L : 0;
    holds_head_ = holds_embedding_ = m.units().empty();
    for (const UnitRange& r : m.units()) {
      blocks_ = std::max<int64_t>(blocks_, std::min<int64_t>(r.last, L) - std::max(r.first, 1) + 1);
      holds_head_ = holds_head_ || r.last == L + 1;
      holds_embedding_ = holds_embedding_ || r.first == 0;
    }
    const int64_t D = c_.head_dim(), P = c_.max_position_embeddings;
    const int64_t tables = c_.rope_local_theta > 0.0f ? 2 : 1;  // global, and local (Gemma)
    std::vector<float> cos(size_t(P * D / 2)), sin(size_t(P * D / 2));
    rope_.resize(be_, DType::f32, tables * 2 * P * D / 2);
    ArenaCursor rc(rope_.tensor());
    rope_cos_ = rc.take(P, D / 2), rope_sin_ = rc.take(P, D / 2);
    rope_tables(cos.data(), sin.data(), P, D, c_.rope_theta, c_.rope_scaling);
    be_.copy_from_host(rope_cos_, cos.data());
    be_.copy_from_host(rope_sin_, sin.data());
    if (tables == 2) {
      rope_local_cos_ = rc.take(P, D / 2), rope_local_sin_ = rc.take(P, D / 2);
      rope_tables(cos.data(), sin.data(), P, D, c_.rope_local_theta, RopeScaling{});
      be_.copy_from_host(rope_local_cos_, cos.data());
      be_.copy_from_host(rope_local_sin_, sin.data());
    }
    embed_scale_ = embedding_scale(c_, ct_);
    if (par_) w_.blocks.resize(size_t(c_.num_hidden_layers));
  }

  size_t arena_bytes() const {
    return t_arena_.bytes() + f_arena_.bytes() + scratch_.bytes() + head_.bytes();
  }

  // The units of `span` (null: all of them).
  LossSum run(const ModelInput& in, bool backward, float grad_scale, float* logits,
              const UnitSpan* span = nullptr);

 private:
  void plan(int64_t B, int64_t seq);
  // Whether units [first, last] lie inside one of the ranges the model was told it runs.
  bool planned_for(int first, int last) const;
  void upload(const ModelInput& in);
  LossSum head_chunk(int64_t n0, int64_t M, const ModelInput& in, bool backward, float grad_scale,
                     float* logits);
  // LoRA dropout applies to this pass: a training pass of a model configured with it.
  bool dropout_on(const ModelInput& in) const { return in.noise.on && lora_dropout_ > 0.0f; }
  // The mask of adapter `index` (layer x kNumProj + projection; the head after the blocks) on
  // weight `name`'s input ("": an input no rank splits, as the head's), for rows from `row` of
  // this input on.
  DropoutMask dropout_mask(const ModelInput& in, int64_t index, const std::string& name, int64_t row) const {
    const uint64_t step_key = dm::mix64(dm::mix64(in.noise.seed) ^ uint64_t(in.noise.step));
    return {.key = dm::mix64(step_key ^ (uint64_t(index) + 1)),
            .p = lora_dropout_,
            .row0 = in.noise.first_row * in.T + row,
            .col0 = name.empty() ? 0 : hooks_.input_column_begin(name),
            .cp = in.noise.cp,
            .cp_rank = in.noise.cp_rank,
            .share_len = in.T};
  }
  // The residual stream (or its gradient) where a pipeline may cut the model, rounded to the
  // compute dtype in place (round_to_scratch_dtype). Done on every layout, one rank's too, so that
  // a stage can send and keep these tensors in bf16 and still compute what one rank computes
  // (docs/distributed.md, "Stages send the compute dtype").
  void round_to_compute(const Tensor& x) { round_to_scratch_dtype(be_, x, scratch_view_); }
  // A span's tensor in or out of the runner's f32 residual stream: copied, or converted where the
  // span's is the compute dtype (exact: the values were rounded where the model is cut).
  void move(const Tensor& dst, const Tensor& src) {
    if (dst.dtype == src.dtype) be_.copy(dst, src);
    else be_.convert(dst, src);
  }
  // Parameter units (see ModelParallel): acquire and re-read the unit's views / release.
  void use(int unit, bool grads, bool weights = true);
  void done(int unit, bool grads) { hooks_.release(unit, grads); }
  // ModelInput::adapters_off: the views without (or again with) the adapters.
  void set_adapters_off(bool off);

  Transformer& m_;
  const ModelConfig& c_;
  Backend& be_;
  DType ct_;                  // compute dtype
  ModelParallel* par_;        // null on one device
  ModelParallel& hooks_;      // par_, or one that does nothing
  WholeRows whole_rows_;      // hooks_ with the rows whole
  ModelParallel* pass_;       // what the blocks call: hooks_, or whole_rows_ (planned rows whole)
  DeviceBuffer rope_;
  Tensor rope_cos_, rope_sin_;
  Tensor rope_local_cos_, rope_local_sin_;  // ModelConfig::rope_local_theta > 0 only
  float embed_scale_ = 1.0f;                // embedding_scale(): Gemma's sqrt(hidden)
  ModelWeights w_;
  bool adapters_off_ = false;  // w_ is bound without the adapters (ModelInput::adapters_off)
  std::array<bool, kNumProj> lora_on_{};
  int64_t lora_rank_ = 0;
  // What the arena is planned for (Transformer::units): the blocks of the largest range run at once
  // (all of them for the whole model), and whether a range holds the head.
  int64_t blocks_ = 0;
  bool holds_head_ = true;
  bool holds_embedding_ = true;
  float lora_dropout_ = 0.0f;  // > 0: the scratch has room for the adapters' dropped inputs
  // Arena, planned for one (B, T)
  int64_t B_ = 0, T_ = 0, chunk_ = 0;
  // Sequence parallelism (ModelParallel::sequence_shards): the residual stream's rows this rank
  // holds, R_ = N / S of them from row R_ * sequence_shard(); R_ = N without it.
  int64_t R_ = 0, first_row_ = 0;
  bool split_rows() const { return R_ < B_ * T_; }  // this plan holds a share of the rows
  bool planned_checkpointing_ = false;
  DeviceBuffer t_arena_;   // block activations (blocks_ of them, or one when checkpointing), final norm
  DeviceBuffer f_arena_;   // residual stream per block run, its gradient, rstd/lse, losses
  DeviceBuffer scratch_;   // block scratch
  DeviceBuffer head_;      // one chunk of logits + LoRA u/du for the head (holds_head_ only)
  DeviceBuffer ce_stats_;  // vocabulary-parallel cross-entropy: row max, sums, target logits
  DeviceBuffer inputs_;    // i32 tokens, targets, positions, segments
  DeviceBuffer logits_f32_;  // a chunk of logits widened for the host (bf16 mode)
  std::vector<BlockActivations> acts_;
  // Mixture of experts: each stored block's routing (its activations point here), and the
  // routing statistics of the forward in progress, which its backward's losses need whole.
  std::vector<MoeRouting> routings_;
  MoeBalanceStats moe_stats_;
  std::vector<uint8_t> moe_counted_;  // this pass's tokens the routing losses count
  BlockScratch scratch_view_{};
  // Residual stream of the blocks run, from the span's first block lb: xs_[l - lb] is block l's
  // input, xs_[le - lb] the span's output (le = L: the head's input).
  std::vector<Tensor> xs_;
  Tensor dx_, y_tmp_;       // its gradient; the recompute target (under checkpointing only)
  Tensor nf_, rstdf_, losses_;  // final norm output, its rstd, per-token losses (holds_head_ only)
  Tensor meanf_;                // the final LayerNorm's row means (holds_head_ and LayerNorm only)
  // Sequence parallelism, where the runner holds the embedding: its lookup's partial rows, whole,
  // before their sum is scattered, and the stream's gradient gathered whole for its backward.
  Tensor whole_f32_;
  Tensor tokens_, targets_, positions_, segments_;
  std::vector<int32_t> default_pos_;
};

void Transformer::Runner::use(int unit, bool grads, bool weights) {
  hooks_.acquire(unit, grads, weights);
  if (!par_) return;  // views bound once: without a parallel layer the storage never moves
  const int64_t L = c_.num_hidden_layers;
  const bool adapters = !adapters_off_;
  if (unit == 0) bind_embedding(w_, m_, adapters);
  else if (unit <= L) w_.blocks[size_t(unit - 1)] = bind_block_weights(m_, unit - 1, adapters);
  else bind_head(w_, m_, adapters);
}

void Transformer::Runner::set_adapters_off(bool off) {
  if (off == adapters_off_) return;
  adapters_off_ = off;
  // Without a parallel layer the views are bound once: bound again, with or without the adapters
  // (a parallel layer's are bound unit by unit in use()).
  if (!par_) w_ = bind_model_weights(m_, !off);
}

void Transformer::Runner::plan(int64_t B, int64_t seq) {
  const bool ckpt = m_.activation_checkpointing();
  if (B == B_ && seq == T_ && ckpt == planned_checkpointing_) return;
  if (seq > c_.max_position_embeddings)
    fail("sequence length " + std::to_string(seq) + " exceeds model.max_position_embeddings (" +
         std::to_string(c_.max_position_embeddings) + ")");
  B_ = B, T_ = seq, planned_checkpointing_ = ckpt;
  const int64_t N = B * seq, C = c_.hidden_size, V = c_.vocab_size;
  // Sequence parallelism where the rows divide over its ranks (training's always do:
  // train/run_layout.h); a pass whose rows do not runs them whole (Runner::run refuses its backward).
  pass_ = N % hooks_.sequence_shards() == 0 ? &hooks_ : &whole_rows_;
  const int64_t S = pass_->sequence_shards();
  const int64_t R = N / S;  // the residual stream's rows here
  R_ = R, first_row_ = pass_->sequence_shard() * R;
  const bool split = S > 1;
  // Only the units this model runs (a pipeline stage's): the largest range's blocks at once, the
  // head's rows where a range holds it. Under checkpointing one block's set is kept, refilled by
  // the recompute, whose output goes to y_tmp_.
  const int64_t stored_blocks = ckpt ? std::min<int64_t>(blocks_, 1) : blocks_;
  const int64_t head = holds_head_ ? 1 : 0, recompute = ckpt ? 1 : 0;
  auto sizes = block_activation_sizes(c_, lora_rank_, lora_on_);

  // A block's activations: the residual stream's part for R rows, the rest for all N, and the
  // experts' rows of a mixture of experts.
  const int64_t expert_rows = moe_expert_rows(c_, N);
  const int64_t block_t = N * (sizes.t_elems - sizes.t_split) + R * sizes.t_split + expert_rows * sizes.t_per_expert_row;
  const int64_t block_f = N * (sizes.f_elems - sizes.f_split) + R * sizes.f_split + expert_rows * sizes.f_per_expert_row;
  // The final norm's output whole (the head reads every row: gathered under sequence parallelism).
  t_arena_.resize(be_, ct_, stored_blocks * block_t + head * N * C);
  // residuals (blocks + 1), dx, y_tmp (checkpointing), the final norm's rstd (and mean) and
  // losses (head), the embedding's whole rows (sequence parallelism)
  const bool whole_rows = split && holds_embedding_;
  f_arena_.resize(be_, DType::f32,
                  stored_blocks * block_f + (blocks_ + 2 + recompute) * R * C +
                      head * (N + norm_saved_per_token(c_) * R) + block_scratch_f32_elems(c_, N) +
                      (whole_rows ? N * C : 0));
  ArenaCursor tc(t_arena_.tensor()), fc(f_arena_.tensor());
  acts_.clear();
  routings_.assign(size_t(stored_blocks), MoeRouting{});
  for (int64_t l = 0; l < stored_blocks; ++l) {
    acts_.push_back(carve_block_activations(tc, fc, N, c_, lora_rank_, lora_on_, R));
    acts_.back().moe.routing = &routings_[size_t(l)];
  }
  xs_.clear();
  for (int64_t l = 0; l <= blocks_; ++l) xs_.push_back(fc.take(R, C));
  dx_ = fc.take(R, C);
  y_tmp_ = ckpt ? fc.take(R, C) : Tensor{};
  if (holds_head_) nf_ = tc.take(N, C), rstdf_ = fc.take(R, 1), losses_ = fc.take(N, 1);
  meanf_ = holds_head_ && c_.layer_norm() ? fc.take(R, 1) : Tensor{};
  whole_f32_ = whole_rows ? fc.take(N, C) : Tensor{};

  const bool dropout = lora_dropout_ > 0.0f;
  scratch_.resize(be_, ct_, block_scratch_elems(c_, N, lora_rank_, dropout, split));
  scratch_view_ = carve_block_scratch(scratch_.tensor(), c_, N, lora_rank_, dropout, split);
  carve_block_scratch_f32(scratch_view_, fc, c_, N);
  // Logits are made and consumed in chunks of rows, so the whole [N, V] matrix never exists.
  // Each chunk's weight-gradient GEMM reads and writes all of dW [V, C] in f32, so chunks must be
  // large for that traffic to stay small next to the FLOPs: 2^25 elements (64 MiB in bf16) is
  // about 1000 rows at V = 32000.
  // Under a split vocabulary every rank takes the same chunks (their reductions pair up), sized
  // by the rows of a share, which the model's own may fall short of by the padding.
  const int64_t chunk_vocab = hooks_.splits_vocabulary() ? hooks_.vocab_share_rows() : V;
  chunk_ = std::clamp<int64_t>((int64_t(1) << 25) / chunk_vocab, 1, N);
  if (holds_head_) {
    head_.resize(be_, ct_, chunk_ * (V + 2 * std::max<int64_t>(lora_rank_, 1) + (dropout ? C : 0)));
    ce_stats_.resize(be_, DType::f32, 3 * chunk_);
  }
  inputs_.resize(be_, DType::i32, 4 * N);
  ArenaCursor ic(inputs_.tensor());
  tokens_ = ic.take(N, 1), targets_ = ic.take(N, 1), positions_ = ic.take(N, 1);
  segments_ = ic.take(N, 1);
  logits_f32_ = DeviceBuffer();
  default_pos_ = row_positions(B, seq);
}

bool Transformer::Runner::planned_for(int first, int last) const {
  if (m_.units().empty()) return true;
  for (const UnitRange& r : m_.units())
    if (r.first <= first && last <= r.last) return true;
  return false;
}

void Transformer::Runner::upload(const ModelInput& in) {
  be_.copy_from_host(tokens_, in.tokens);
  if (in.targets) be_.copy_from_host(targets_, in.targets);
  be_.copy_from_host(positions_, in.positions ? in.positions : default_pos_.data());
  if (in.segments) be_.copy_from_host(segments_, in.segments);
}

LossSum Transformer::Runner::head_chunk(int64_t n0, int64_t M, const ModelInput& in,
                                       bool backward, float grad_scale, float* logits_out) {
  const int64_t C = c_.hidden_size, V = c_.vocab_size, r = std::max<int64_t>(lora_rank_, 1);
  const int64_t rank = w_.head.rank();
  ArenaCursor hc(head_.tensor());
  const Tensor logits = rows_of(hc.take(1, chunk_ * V), M, V);
  const Tensor u = rows_of(hc.take(1, chunk_ * r), M, rank);
  const Tensor du = rows_of(hc.take(1, chunk_ * r), M, rank);
  const Tensor x = nf_.rows_slice(n0, M);
  std::optional<AdapterDropout> drop;
  if (dropout_on(in) && rank > 0)
    drop = AdapterDropout{dropout_mask(in, int64_t(c_.num_hidden_layers) * kNumProj, "", n0),
                          hc.take(1, chunk_ * C)};
  const AdapterDropout* head_drop = drop ? &*drop : nullptr;
  {
    MT_PROFILE("lm_head forward");
    linear_layer_forward(be_, logits, u, x, w_.head, head_drop);
  }
  LossSum ls;
  if (logits_out) {
    Tensor wide = logits;
    if (ct_ != DType::f32) {
      if (logits_f32_.empty()) logits_f32_.resize(be_, DType::f32, chunk_ * V);
      wide = rows_of(logits_f32_.tensor(), M, V);
      be_.convert(wide, logits);
    }
    be_.copy_to_host(logits_out + n0 * V, wide);
  }
  if (!in.targets) return ls;
  const Tensor targets = targets_.rows_slice(n0, M), losses = losses_.rows_slice(n0, M);
  const Tensor dlogits = backward ? logits : Tensor{};
  {
    MT_PROFILE("cross-entropy");
    // Runs of rows of one gradient weight (ModelInput::token_weights: a sequence each), each
    // through the kernels with its own scale; one run without weights.
    const std::vector<WeightRun> runs = weight_runs(backward ? in.token_weights : nullptr, n0, M);
    const auto part = [](const Tensor& t, const WeightRun& r) {
      return t ? t.rows_slice(r.begin, r.rows) : Tensor{};
    };
    if (hooks_.splits_vocabulary()) {  // this rank holds vocabulary columns [v0, v0 + V)
      const int64_t v0 = hooks_.vocab_begin();
      ArenaCursor sc(ce_stats_.tensor());
      const Tensor mx = sc.take(M, 1), sums = sc.take(2 * M, 1);
      be_.cross_entropy_row_max(mx, logits, targets);
      hooks_.reduce_max(mx);
      // A run's sums [2 rows] sit at 2 x its first row: every run's in one reduction.
      const auto run_sums = [&](const WeightRun& r) { return sums.rows_slice(2 * r.begin, 2 * r.rows); };
      for (const WeightRun& r : runs)
        be_.cross_entropy_row_sums(run_sums(r), part(logits, r), part(targets, r), part(mx, r), v0);
      hooks_.reduce_sum(sums);
      for (const WeightRun& r : runs)
        ls.sum += be_.cross_entropy_finish(part(losses, r), part(dlogits, r), part(logits, r),
                                           part(targets, r), part(mx, r), run_sums(r), v0,
                                           grad_scale * r.weight);
    } else {
      for (const WeightRun& r : runs)
        ls.sum += be_.cross_entropy(part(losses, r), part(dlogits, r), part(logits, r),
                                    part(targets, r), grad_scale * r.weight);
    }
  }
  if (in.token_losses) be_.copy_to_host(in.token_losses + n0, losses);
  ls.count = count_targets(in.targets + n0, M);
  if (backward) {
    // Gradient of the final norm's output for these rows, into the scratch's t3 rows.
    const Tensor dnf = scratch_view_.t3.flat_slice(n0 * C, M * C).view(M, C);
    {
      MT_PROFILE("lm_head backward");
      linear_layer_backward(be_, dnf, false, du, logits, x, u, w_.head, head_drop);
    }
    // Each rank's vocabulary columns give a partial dnf: summed here, or over all rows at once
    // and scattered to the ranks' rows under sequence parallelism (Runner::run).
    if (!split_rows()) hooks_.reduce_sum(dnf);
  }
  return ls;
}

LossSum Transformer::Runner::run(const ModelInput& in, bool backward, float grad_scale,
                                float* logits, const UnitSpan* span) {
  MT_CHECK(in.B > 0 && in.T > 0 && in.tokens, "empty model input");
  const bool split_vocab = hooks_.splits_vocabulary();
  MT_CHECK(!(split_vocab && logits), "whole logits are not available under tensor parallelism");
  plan(in.B, in.T);
  const int64_t N = in.B * in.T, C = c_.hidden_size, L = c_.num_hidden_layers;
  const int head_unit = int(L) + 1;
  const int first = span ? span->first : 0, last = span ? span->last : head_unit;
  MT_CHECK(0 <= first && first <= last && last <= head_unit, "unit span out of range");
  MT_CHECK(first == 0 || span->x_in, "a span after the embedding needs its input");
  MT_CHECK(last == head_unit || span->x_out || (backward && span->dy), "a span before the head needs its output");
  MT_CHECK(planned_for(first, last), "units " + std::to_string(first) + "-" + std::to_string(last) +
                                         " are outside those the model was told it runs (Transformer::set_units)");
  check_token_ids(in.tokens, in.targets, N, split_vocab ? hooks_.vocab_size() : c_.vocab_size);
  MT_CHECK(!(backward && in.adapters_off), "a training pass with the adapters off");
  set_adapters_off(in.adapters_off);
  upload(in);
  const int64_t v0 = split_vocab ? hooks_.vocab_begin() : 0;

  if (backward && pass_ != &hooks_)
    fail("sequence parallelism: a training pass of " + std::to_string(in.B) + " x " + std::to_string(in.T) +
         " tokens does not divide over the " + std::to_string(hooks_.sequence_shards()) +
         " tensor-parallel ranks; set train.sequence_parallel = false");
  BlockInput bi{in.B, in.T, positions_, in.segments ? segments_ : Tensor{}, rope_cos_,
                rope_sin_, pass_};
  bi.rope_local_cos = rope_local_cos_, bi.rope_local_sin = rope_local_sin_;
  bi.context = m_.context_attention();
  // LoRA dropout: each block's masks, drawn for the forward and drawn again for its backward.
  std::array<DropoutMask, kNumProj> masks{};
  auto with_dropout = [&](int64_t l) -> const BlockInput& {
    if (!dropout_on(in)) return bi;
    for (int p = 0; p < kNumProj; ++p)
      masks[size_t(p)] = dropout_mask(in, l * kNumProj + p, proj_param_name(l, Proj(p)) + ".weight", 0);
    if (lora_fuses_qkv(m_.lora_config())) masks[kK] = masks[kV] = masks[kQ];  // one adapter, one input
    bi.lora_dropout = &masks;
    return bi;
  };
  const bool ckpt = planned_checkpointing_;
  const bool tied = c_.tie_word_embeddings;
  // Blocks [lb, le) run; x(lb) is the span's input, x(le) its output.
  const int64_t lb = first == 0 ? 0 : first - 1, le = std::min<int64_t>(last, L);
  const auto x = [&](int64_t l) -> const Tensor& { return xs_[size_t(l - lb)]; };

  const bool split = split_rows();  // sequence parallelism: this rank's rows of the residual stream
  if (first == 0) {
    use(0, false);
    {
      MT_PROFILE("embedding");
      // Vocabulary-parallel: each token's row is on one rank, the others' rows zero: summed over
      // the ranks, or under sequence parallelism summed and scattered to the ranks' rows.
      if (split) {
        be_.embedding_forward(whole_f32_, tokens_, w_.embed, v0);
        hooks_.sum_scatter_rows(x(0), whole_f32_);
      } else {
        be_.embedding_forward(x(0), tokens_, w_.embed, v0);
        hooks_.reduce_sum(x(0));
      }
    }
    if (embed_scale_ != 1.0f) be_.scale(x(0), embed_scale_);
    if (c_.learned_positions()) {  // + the position's row, whole on every rank (dx_ is free here)
      MT_PROFILE("embedding");
      be_.embedding_forward(dx_, positions_.rows_slice(first_row_, R_), w_.positions, 0);
      be_.residual_add(x(0), x(0), dx_);
    }
    done(0, false);
  } else {
    move(x(lb), span->x_in);
  }
  // The routing losses' statistics span every MoE layer: a span of some of them starts from those
  // of the units before it (UnitSpan::routing_stats). A backward without the head reads the
  // totals below, after its recompute.
  const bool routing = c_.routing_losses();
  const int64_t E = c_.num_experts;
  MT_CHECK(!routing || (first == 0 && last == head_unit) || span->routing_stats,
           "a span of a model with routing losses needs the statistics of the spans before it");
  moe_stats_ = MoeBalanceStats{};
  int64_t dropped = 0;  // choices a capacity factor dropped, this forward's (not a recompute's)
  const bool carried = routing && span && span->routing_stats && !span->routing_stats->empty();
  if (carried && !(backward && last < head_unit)) unpack_balance_stats(moe_stats_, *span->routing_stats, E);
  bi.moe_loss.gather = &moe_stats_;
  // The tokens the routing losses count: not a row's padding (HF's attention mask).
  moe_counted_.clear();
  if (in.padding && c_.moe()) {
    moe_counted_.resize(size_t(N));
    for (int64_t i = 0; i < N; ++i) moe_counted_[size_t(i)] = in.padding[i] == 0;
  }
  bi.moe_loss.counted = moe_counted_.empty() ? nullptr : moe_counted_.data();
  for (int64_t l = lb; l < le; ++l) {
    use(int(l) + 1, false);
    block_forward(be_, x(l + 1), x(l), acts_[size_t(ckpt ? 0 : l - lb)], w_.blocks[l], with_dropout(l), c_,
                  scratch_view_);
    if (c_.moe_layer(l)) dropped += acts_[size_t(ckpt ? 0 : l - lb)].moe.routing->dropped;
    done(int(l) + 1, false);
    round_to_compute(x(l + 1));  // a block's output: where a pipeline may cut
  }
  bi.moe_loss.gather = nullptr;  // a recompute under checkpointing routes again, counts nothing
  LossSum total;
  total.dropped = dropped;
  if (last < head_unit) {
    if (span->x_out) move(span->x_out, x(le));
    if (!backward) {
      if (routing) *span->routing_stats = pack_balance_stats(moe_stats_, E, 0.0);
      return total;
    }
    if (routing) {  // the totals the head's span computed, and the batch's counted tokens
      const double count = unpack_balance_stats(moe_stats_, *span->routing_stats, E);
      bi.moe_loss.stats = &moe_stats_;
      bi.moe_loss.loss_scale = double(grad_scale) * count;
    }
    move(dx_, span->dy);
  } else {
    // The head's forward and backward run chunk by chunk together, so its unit is acquired once
    // with gradients. A tied head is the embedding, which then stays held until the embedding's
    // own backward at the end.
    use(head_unit, backward);
    if (tied) use(0, backward);
    // This rank's rows of the final norm, gathered whole for the head under sequence parallelism.
    const Tensor nf_own = nf_.rows_slice(first_row_, R_);
    norm_forward(be_, c_, nf_own, meanf_, rstdf_, x(L), w_.final_norm);
    if (split) hooks_.gather_rows(nf_, nf_own);

    for (int64_t n0 = 0; n0 < N; n0 += chunk_) {
      LossSum ls = head_chunk(n0, std::min(chunk_, N - n0), in, backward, grad_scale, logits);
      total.sum += ls.sum, total.count += ls.count;
    }
    // The routing losses, as transformers adds them to the mean token loss (model/moe_routing.h).
    // A training pass sums their statistics, and the counted tokens, over the ranks holding the
    // batch's other tokens, so that every layout computes one rank's. The objective's gradient is
    // grad_scale x (token losses + routing x counted tokens): the routing terms' factor is
    // grad_scale x the whole batch's count (bi.moe_loss.loss_scale).
    if (routing) {
      double count = double(total.count);
      if (backward && m_.token_sum()) {
        std::vector<double> v = pack_balance_stats(moe_stats_, E, count);
        m_.token_sum()(v.data(), int64_t(v.size()));
        count = unpack_balance_stats(moe_stats_, v, E);
      }
      // For the spans before this one: their backwards read the totals.
      if (span && span->routing_stats) *span->routing_stats = pack_balance_stats(moe_stats_, E, count);
      total.routing = double(c_.aux_loss_coef()) * load_balancing_loss(moe_stats_) +
                      double(c_.router_z_loss_coef) * router_z_loss(moe_stats_);
      bi.moe_loss.stats = &moe_stats_;
      bi.moe_loss.loss_scale = double(grad_scale) * count;
    }
    if (!backward) {
      done(head_unit, false);
      if (tied) done(0, false);
      return total;
    }

    // The head's input gradient, whole (each chunk's rows in t3): summed by head_chunk, or here
    // and scattered to the ranks' rows (into t0) under sequence parallelism.
    Tensor dnf = rows_of(scratch_view_.t3, N, C);
    if (split) {
      const Tensor own = rows_of(scratch_view_.t0, R_, C);
      hooks_.sum_scatter_rows(own, dnf);
      dnf = own;
    }
    be_.fill(dx_, 0.0f);
    norm_backward(be_, c_, dx_, dnf, x(L), w_.final_norm, meanf_, rstdf_);
    done(head_unit, true);
  }
  for (int64_t l = le - 1; l >= lb; --l) {
    use(int(l) + 1, true);
    if (ckpt) {  // recompute this block's activations from its saved input
      MT_PROFILE("recompute (checkpointing)");
      block_forward(be_, y_tmp_, x(l), acts_[0], w_.blocks[l], with_dropout(l), c_, scratch_view_);
    }
    block_backward(be_, dx_, x(l), acts_[size_t(ckpt ? 0 : l - lb)], w_.blocks[l], with_dropout(l), c_, scratch_view_);
    done(int(l) + 1, true);
    if (l > 0) round_to_compute(dx_);  // the gradient of a block's output (block l - 1's): a cut
  }
  if (first > 0) {
    if (span->dx) move(span->dx, dx_);
    if (tied && last == head_unit) done(0, true);  // the head's share of the tied embedding
    return total;
  }
  use(0, true, /*weights=*/tied);  // a lookup's gradient reads no weights (tied: held anyway)
  {
    MT_PROFILE("embedding");
    // Every rank's rows (gathered under sequence parallelism): the lookups' gradients are each
    // rank's whole ones, as without it.
    const Tensor dx = split ? whole_f32_ : dx_;
    if (split) hooks_.gather_rows(whole_f32_, dx_);
    if (w_.dpositions) be_.embedding_backward(w_.dpositions, positions_, dx, 0);  // unscaled
    if (embed_scale_ != 1.0f && w_.dembed) be_.scale(dx, embed_scale_);
    if (w_.dembed) be_.embedding_backward(w_.dembed, tokens_, dx, v0);
  }
  done(0, true);
  return total;
}

bool sequence_split_gradient(const std::string& name) {
  auto ends_with = [&](const std::string& tail) {
    return name.size() >= tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
  };
  return ends_with("layernorm.weight") || ends_with("layernorm.bias") ||
         name.rfind(std::string(kFinalNormPrefix) + ".", 0) == 0;
}

void Transformer::set_units(std::vector<UnitRange> ranges) {
  const int head = int(config_.num_hidden_layers) + 1;
  for (const UnitRange& r : ranges)
    MT_CHECK(0 <= r.first && r.first <= r.last && r.last <= head, "unit range out of range");
  units_ = std::move(ranges);
  runner_.reset();  // planned again, for these units, at the next forward
}

void Transformer::ensure_runner() {
  if (!runner_) runner_ = std::make_unique<Runner>(*this);
}

LossSum Transformer::forward_backward(const ModelInput& in, float grad_scale) {
  ensure_runner();
  MT_CHECK(in.targets, "forward_backward needs targets");
  return runner_->run(in, true, grad_scale, nullptr);
}

LossSum Transformer::run_units(const ModelInput& in, const UnitSpan& span, bool backward,
                              float grad_scale) {
  ensure_runner();
  MT_CHECK(!backward || in.targets || span.last <= config_.num_hidden_layers,
           "a backward through the head needs targets");
  return runner_->run(in, backward, grad_scale, nullptr, &span);
}

LossSum Transformer::forward_loss(const ModelInput& in) {
  ensure_runner();
  return runner_->run(in, false, 0.0f, nullptr);
}

void Transformer::forward_logits(const ModelInput& in, float* logits) {
  ensure_runner();
  ModelInput no_targets = in;
  no_targets.targets = nullptr;
  runner_->run(no_targets, false, 0.0f, logits);
}

size_t Transformer::activation_bytes() const { return runner_ ? runner_->arena_bytes() : 0; }

}  // namespace mt
