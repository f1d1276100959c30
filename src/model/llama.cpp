#include "model/llama.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "core/profile.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/cross_entropy_vocab_parallel.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/rope.h"
#include "model/init.h"
#include "model/param_shapes.h"
#include "model/weights.h"

namespace mt {

std::string layer_prefix(int64_t layer) { return "model.layers." + std::to_string(layer) + "."; }

std::string proj_param_name(int64_t layer, Proj p) {
  const char* attn = "self_attn.";
  const char* mlp = "mlp.";
  return layer_prefix(layer) + (p <= kO ? attn : mlp) + proj_name(p) + "_proj";
}

std::array<bool, kNumProj> lora_targets_mask(const LoraConfig& lora) {
  std::array<bool, kNumProj> on{};
  if (!lora.enabled) return on;
  for (const auto& t : lora.targets)
    for (int p = 0; p < kNumProj; ++p)
      if (t == proj_name(Proj(p))) on[p] = true;
  return on;
}

bool lora_targets_head(const LoraConfig& lora) {
  return lora.enabled && std::find(lora.targets.begin(), lora.targets.end(), "lm_head") !=
                             lora.targets.end();
}

// ---------------------------------------------------------------------------------------------
// Parameter declaration

LlamaModel::LlamaModel(const LlamaConfig& config, Precision precision, const LoraConfig& lora,
                       bool own_storage)
    : config_(config), precision_(precision), lora_(lora) {
  config_.validate();
  const bool bf = precision == Precision::bf16;
  const bool frozen = lora.enabled;
  ParamPlan matrix{/*master=*/!bf || !frozen, /*compute=*/bf, /*grad=*/!frozen, /*decay=*/true};
  ParamPlan norm{true, false, !frozen, false};
  ParamPlan embed{true, bf && config.tie_word_embeddings, !frozen, true};
  ParamPlan adapter{true, bf, true, true};
  // One list of names and shapes serves the model, the shard planner and the memory planner.
  for (const ParamShape& p : llama_param_shapes(config_, lora)) {
    if (p.adapter) adapters_.add(p.name, p.shape, adapter);
    else if (p.shape.size() == 1) base_.add(p.name, p.shape, norm);
    else if (p.name == kEmbedName) base_.add(p.name, p.shape, embed);
    else base_.add(p.name, p.shape, matrix);
  }
  base_.allocate(own_storage);
  if (lora.enabled) adapters_.allocate(own_storage);
}

LlamaModel::~LlamaModel() = default;

void LlamaModel::init_weights(uint64_t seed) {
  MT_CHECK(owns_storage(), "init_weights on a model whose parameters live in a parallel layer");
  std::vector<float> tmp;
  for (auto& p : base_.params()) {
    tmp.assign(size_t(p.numel), 1.0f);
    bool is_norm = p.shape.size() == 1;
    if (!is_norm) fill_normal(tmp.data(), p.numel, 0.02f, seed, p.name);
    base_.set_values(p, tmp.data());
  }
  init_adapters(seed);
}

void LlamaModel::init_adapters(uint64_t seed) {
  MT_CHECK(owns_storage(), "init_adapters on a model whose parameters live in a parallel layer");
  for (auto& p : adapters_.params()) {
    bool is_a = p.name.find("lora_A") != std::string::npos;
    if (is_a) fill_normal(p.master, p.numel, lora_.init_std, seed, p.name);
    else std::fill(p.master, p.master + p.numel, 0.0f);
  }
  adapters_.sync_compute();
}

void LlamaModel::sync_compute_weights() {
  base_.sync_compute();
  adapters_.sync_compute();
}

void LlamaModel::merge_adapters() {
  if (!lora_.enabled) return;
  MT_CHECK(owns_storage(), "merge_adapters on a model whose parameters live in a parallel layer");
  const float scale = lora_.alpha / float(lora_.rank);
  const int64_t r = lora_.rank;
  auto merge = [&](const std::string& base_name, const std::string& prefix) {
    Param& W = base_.get(base_name);
    Param& A = adapters_.get(prefix + ".lora_A.weight");
    Param& B = adapters_.get(prefix + ".lora_B.weight");
    const int64_t out = W.shape[0], in = W.shape[1];
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i) {
        double d = 0.0;
        for (int64_t k = 0; k < r; ++k) d += double(B.master[o * r + k]) * A.master[k * in + i];
        int64_t idx = o * in + i;
        float w = W.master ? W.master[idx] : to_float(W.compute[idx]);
        float merged = float(w + scale * d);
        if (W.master) W.master[idx] = merged;
        if (W.compute) W.compute[idx] = float_to_bf16(merged);
      }
    std::fill(B.master, B.master + B.numel, 0.0f);
  };
  auto on = lora_targets_mask(lora_);
  for (int64_t l = 0; l < config_.num_hidden_layers; ++l)
    for (int p = 0; p < kNumProj; ++p)
      if (on[p]) merge(proj_param_name(l, Proj(p)) + ".weight", proj_param_name(l, Proj(p)));
  if (lora_targets_head(lora_))
    merge(config_.tie_word_embeddings ? kEmbedName : kHeadName, "lm_head");
  adapters_.sync_compute();
}

// ---------------------------------------------------------------------------------------------
// The compute-type-specific runner: weight views and the activation arena.

struct LlamaModel::Runner {
  virtual ~Runner() = default;
  virtual LossSum run(const ModelInput& in, bool backward, float grad_scale, float* logits) = 0;
  virtual size_t arena_bytes() const = 0;
};

namespace {

template <class T>
class RunnerImpl : public LlamaModel::Runner {
 public:
  explicit RunnerImpl(LlamaModel& m)
      : m_(m), c_(m.config()), par_(m.parallel()),
        partials_(par_ ? par_->partials() : nullptr),
        w_(par_ ? ModelWeights<T>{} : bind_model_weights<T>(m)),
        lora_on_(lora_targets_mask(m.lora_config())),
        lora_rank_(m.has_lora() ? m.lora_config().rank : 0) {
    const int64_t D = c_.head_dim();
    rope_cos_.resize(c_.max_position_embeddings * D / 2);
    rope_sin_.resize(c_.max_position_embeddings * D / 2);
    rope_tables(rope_cos_.data(), rope_sin_.data(), c_.max_position_embeddings, D, c_.rope_theta,
                c_.rope_scaling);
    if (par_) w_.blocks.resize(size_t(c_.num_hidden_layers));
  }

  size_t arena_bytes() const override {
    return t_arena_.bytes() + f_arena_.bytes() + scratch_.bytes() + head_.bytes();
  }

  LossSum run(const ModelInput& in, bool backward, float grad_scale, float* logits) override;

 private:
  void plan(int64_t B, int64_t seq);
  LossSum head_chunk(int64_t n0, int64_t M, const ModelInput& in, bool backward, float grad_scale,
                     float* logits);
  // Parameter units (see ModelParallel): acquire and re-read the unit's pointers / release.
  void use(int unit, bool grads, bool weights = true);
  void done(int unit, bool grads) {
    if (par_) par_->release(unit, grads);
  }

  LlamaModel& m_;
  const LlamaConfig& c_;
  ModelParallel* par_ = nullptr;
  PartialSums* partials_ = nullptr;  // tensor parallelism, else null
  std::vector<float> rope_cos_, rope_sin_;
  ModelWeights<T> w_;
  std::array<bool, kNumProj> lora_on_{};
  int64_t lora_rank_ = 0;
  // Arena, planned for one (B, T)
  int64_t B_ = 0, T_ = 0, chunk_ = 0;
  bool planned_checkpointing_ = false;
  Buffer<T> t_arena_;      // block activations (all layers, or one when checkpointing), final norm
  Buffer<float> f_arena_;  // residual stream per layer, its gradient, rstd/lse, positions
  Buffer<T> scratch_;      // block scratch
  Buffer<T> head_;         // one chunk of logits + LoRA u/du for the head
  std::vector<BlockActivations<T>> acts_;
  BlockScratch<T> scratch_view_{};
  std::vector<float*> xs_;  // residual stream: xs_[l] is block l's input, xs_[L] the output
  float* dx_ = nullptr;
  float* y_tmp_ = nullptr;  // recompute target under checkpointing
  T* nf_ = nullptr;         // final norm output
  float* rstdf_ = nullptr;
  float* losses_ = nullptr;
  std::vector<float> ce_stats_;  // vocabulary-parallel cross-entropy: row max, sum, target logit
  std::vector<int32_t> default_pos_;
};

template <class T>
void RunnerImpl<T>::use(int unit, bool grads, bool weights) {
  if (!par_) return;
  par_->acquire(unit, grads, weights);
  const int64_t L = c_.num_hidden_layers;
  if (unit == 0) bind_embedding(w_, m_);
  else if (unit <= L) w_.blocks[size_t(unit - 1)] = bind_block_weights<T>(m_, unit - 1);
  else bind_head(w_, m_);
}

template <class T>
void RunnerImpl<T>::plan(int64_t B, int64_t seq) {
  const bool ckpt = m_.activation_checkpointing();
  if (B == B_ && seq == T_ && ckpt == planned_checkpointing_) return;
  if (seq > c_.max_position_embeddings)
    fail("sequence length " + std::to_string(seq) + " exceeds model.max_position_embeddings (" +
         std::to_string(c_.max_position_embeddings) + ")");
  B_ = B, T_ = seq, planned_checkpointing_ = ckpt;
  const int64_t N = B * seq, C = c_.hidden_size, L = c_.num_hidden_layers, V = c_.vocab_size;
  const int64_t stored_blocks = ckpt ? 1 : L;
  auto sizes = block_activation_sizes(c_, lora_rank_, lora_on_);

  t_arena_.resize(stored_blocks * N * sizes.t_elems + N * C);
  // residuals (L+1), dx, y_tmp, rstd_f, losses
  f_arena_.resize(stored_blocks * N * sizes.f_elems + (L + 3) * N * C + 2 * N);
  T* tc = t_arena_.data();
  float* fc = f_arena_.data();
  acts_.clear();
  for (int64_t l = 0; l < stored_blocks; ++l)
    acts_.push_back(carve_block_activations<T>(tc, fc, N, c_, lora_rank_, lora_on_));
  nf_ = tc;
  xs_.clear();
  for (int64_t l = 0; l <= L; ++l) xs_.push_back(fc), fc += N * C;
  dx_ = fc, fc += N * C;
  y_tmp_ = fc, fc += N * C;
  rstdf_ = fc, fc += N;
  losses_ = fc;

  scratch_.resize(block_scratch_elems(c_, N, lora_rank_));
  scratch_view_ = carve_block_scratch<T>(scratch_.data(), c_, N, lora_rank_);
  // Logits are made and consumed in chunks of rows, so the whole [N, V] matrix never exists.
  // Each chunk's weight-gradient GEMM reads and writes all of dW [V, C] in f32, so chunks must be
  // large for that traffic to stay small next to the FLOPs: 2^25 elements (64 MiB in bf16) is
  // about 1000 rows at V = 32000.
  chunk_ = std::clamp<int64_t>((int64_t(1) << 25) / V, 1, N);
  head_.resize(chunk_ * (V + 2 * std::max<int64_t>(lora_rank_, 1)));
  ce_stats_.resize(size_t(3 * chunk_));
  default_pos_.resize(N);
  for (int64_t n = 0; n < N; ++n) default_pos_[n] = int32_t(n % seq);
}

template <class T>
LossSum RunnerImpl<T>::head_chunk(int64_t n0, int64_t M, const ModelInput& in, bool backward,
                                  float grad_scale, float* logits_out) {
  const int64_t C = c_.hidden_size, V = c_.vocab_size, r = std::max<int64_t>(lora_rank_, 1);
  T* logits = head_.data();
  T* u = logits + chunk_ * V;
  T* du = u + chunk_ * r;
  const T* x = nf_ + n0 * C;
  {
    MT_PROFILE("lm_head forward");
    linear_layer_forward(logits, u, x, w_.head, M, V, C);
  }
  LossSum ls;
  if (logits_out) {
    for (int64_t i = 0; i < M * V; ++i) logits_out[n0 * V + i] = to_float(logits[i]);
  }
  if (!in.targets) return ls;
  if (partials_) {  // this rank holds vocabulary columns [v0, v0 + V) of the logits
    MT_PROFILE("cross-entropy");
    const int64_t v0 = par_->vocab_begin();
    float* mx = ce_stats_.data();
    float* sums = mx + chunk_;
    vp_ce_row_max(mx, logits, in.targets + n0, M, V);
    partials_->max(mx, M);
    vp_ce_row_sums(sums, logits, in.targets + n0, mx, M, V, v0);
    partials_->sum(sums, 2 * M);
    ls.sum = vp_ce_finish(losses_ + n0, backward ? logits : nullptr, logits, in.targets + n0, mx,
                          sums, M, V, v0, grad_scale);
  } else {
    MT_PROFILE("cross-entropy");
    ls.sum = cross_entropy_forward_backward<T>(losses_ + n0, backward ? logits : nullptr, logits,
                                               in.targets + n0, M, V, grad_scale);
  }
  for (int64_t i = 0; i < M; ++i) ls.count += in.targets[n0 + i] >= 0;
  if (backward) {
    // Gradient of the final norm's output for these rows, in T, into the scratch's t3 rows.
    T* dnf = scratch_view_.t3 + n0 * C;
    {
      MT_PROFILE("lm_head backward");
      linear_layer_backward(dnf, false, du, logits, x, u, w_.head, M, V, C);
    }
    sum_partials(partials_, dnf, M * C);  // each rank's vocabulary columns give a partial dnf
  }
  return ls;
}

template <class T>
LossSum RunnerImpl<T>::run(const ModelInput& in, bool backward, float grad_scale,
                           float* logits) {
  MT_CHECK(in.B > 0 && in.T > 0 && in.tokens, "empty model input");
  MT_CHECK(!(partials_ && logits), "whole logits are not available under tensor parallelism");
  plan(in.B, in.T);
  const int64_t N = in.B * in.T, C = c_.hidden_size, L = c_.num_hidden_layers;
  const int64_t V = par_ ? par_->vocab_size() : c_.vocab_size;
  const int64_t v0 = par_ ? par_->vocab_begin() : 0, rows = c_.vocab_size;  // rows held here
  for (int64_t n = 0; n < N; ++n)
    if (in.tokens[n] < 0 || in.tokens[n] >= V)
      fail("token id " + std::to_string(in.tokens[n]) + " at position " + std::to_string(n) +
           " is outside the vocabulary [0, " + std::to_string(V) + ")");
  if (in.targets)
    for (int64_t n = 0; n < N; ++n)
      if (in.targets[n] >= V)
        fail("target id " + std::to_string(in.targets[n]) + " is outside the vocabulary");

  BlockInput bi{in.B, in.T, in.positions ? in.positions : default_pos_.data(), in.segments,
                rope_cos_.data(), rope_sin_.data(), partials_};
  const bool ckpt = planned_checkpointing_;
  const bool tied = c_.tie_word_embeddings;
  const int head_unit = int(L) + 1;

  use(0, false);
  {
    MT_PROFILE("embedding");
    if (partials_) embedding_forward_rows(xs_[0], in.tokens, w_.embed, N, C, v0, rows);
    else embedding_forward(xs_[0], in.tokens, w_.embed, N, C);
  }
  sum_partials(partials_, xs_[0], N * C);  // vocabulary-parallel: each token's row is on one rank
  done(0, false);
  for (int64_t l = 0; l < L; ++l) {
    use(int(l) + 1, false);
    block_forward(xs_[l + 1], xs_[l], acts_[ckpt ? 0 : l], w_.blocks[l], bi, c_, scratch_view_);
    done(int(l) + 1, false);
  }
  // The head's forward and backward run chunk by chunk together, so its unit is acquired once
  // with gradients. A tied head is the embedding, which then stays held until the embedding's own
  // backward at the end.
  use(head_unit, backward);
  if (tied) use(0, backward);
  rmsnorm_forward(nf_, rstdf_, xs_[L], w_.final_norm, N, C, c_.rms_norm_eps);

  LossSum total;
  for (int64_t n0 = 0; n0 < N; n0 += chunk_) {
    LossSum ls = head_chunk(n0, std::min(chunk_, N - n0), in, backward, grad_scale, logits);
    total.sum += ls.sum, total.count += ls.count;
  }
  if (!backward) {
    done(head_unit, false);
    if (tied) done(0, false);
    return total;
  }

  std::fill(dx_, dx_ + N * C, 0.0f);
  rmsnorm_backward(dx_, w_.dfinal_norm, scratch_view_.t3, xs_[L], w_.final_norm, rstdf_, N, C);
  done(head_unit, true);
  for (int64_t l = L - 1; l >= 0; --l) {
    use(int(l) + 1, true);
    if (ckpt) {  // recompute this block's activations from its saved input
      MT_PROFILE("recompute (checkpointing)");
      block_forward(y_tmp_, xs_[l], acts_[0], w_.blocks[l], bi, c_, scratch_view_);
    }
    block_backward(dx_, xs_[l], acts_[ckpt ? 0 : l], w_.blocks[l], bi, c_, scratch_view_);
    done(int(l) + 1, true);
  }
  use(0, true, /*weights=*/tied);  // a lookup's gradient reads no weights (tied: held anyway)
  {
    MT_PROFILE("embedding");
    if (w_.dembed && partials_) embedding_backward_rows(w_.dembed, in.tokens, dx_, N, C, v0, rows);
    else if (w_.dembed) embedding_backward(w_.dembed, in.tokens, dx_, N, C);
  }
  done(0, true);
  return total;
}

}  // namespace

void LlamaModel::ensure_runner() {
  if (runner_) return;
  if (precision_ == Precision::bf16) runner_ = std::make_unique<RunnerImpl<bf16>>(*this);
  else runner_ = std::make_unique<RunnerImpl<float>>(*this);
}

LossSum LlamaModel::forward_backward(const ModelInput& in, float grad_scale) {
  ensure_runner();
  MT_CHECK(in.targets, "forward_backward needs targets");
  return runner_->run(in, true, grad_scale, nullptr);
}

LossSum LlamaModel::forward_loss(const ModelInput& in) {
  ensure_runner();
  return runner_->run(in, false, 0.0f, nullptr);
}

void LlamaModel::forward_logits(const ModelInput& in, float* logits) {
  ensure_runner();
  ModelInput no_targets = in;
  no_targets.targets = nullptr;
  runner_->run(no_targets, false, 0.0f, logits);
}

size_t LlamaModel::activation_bytes() const { return runner_ ? runner_->arena_bytes() : 0; }

}  // namespace mt
