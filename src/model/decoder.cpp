#include "model/decoder.h"

#include <algorithm>

#include "backend/device_buffer.h"
#include "core/error.h"
#include "core/rope_frequencies.h"
#include "core/token_ids.h"
#include "model/weights.h"

namespace mt {

struct Decoder::Impl {
  virtual ~Impl() = default;
  virtual const std::vector<float>& step(int32_t token) = 0;
  int64_t pos = 0, max_len = 0;
};

namespace {

// Each step is the training block's own forward for one token (block_forward with a KV cache),
// so generation and training cannot drift apart.
class DecoderImpl : public Decoder::Impl {
 public:
  DecoderImpl(Transformer& m, int64_t len)
      : c_(m.config()), be_(m.backend()), w_(bind_model_weights(m)) {
    max_len = len;
    const int64_t C = c_.hidden_size, kv = c_.kv_dim(), D = c_.head_dim(), V = c_.vocab_size;
    const int64_t L = c_.num_hidden_layers, rank = m.has_lora() ? m.lora_config().rank : 0;
    const DType ct = m.compute_dtype();
    const auto lora_on = lora_targets_mask(m.lora_config());

    std::vector<float> cos(size_t(len * D / 2)), sin(size_t(len * D / 2));
    const bool local = c_.rope_local_theta > 0.0f;  // a second pair of tables (Gemma)
    const auto sizes = block_activation_sizes(c_, rank, lora_on);
    const int64_t expert_rows = moe_expert_rows(c_, 1);  // one token's
    f32_.resize(be_, DType::f32, (local ? 2 : 1) * len * D + 2 * L * len * kv + 3 * C + 2 + V +
                                     sizes.f_elems + expert_rows * sizes.f_per_expert_row +
                                     block_scratch_f32_elems(c_, 1));
    ArenaCursor f(f32_.tensor());
    rope_cos_ = f.take(len, D / 2), rope_sin_ = f.take(len, D / 2);
    if (local) {
      rope_local_cos_ = f.take(len, D / 2), rope_local_sin_ = f.take(len, D / 2);
      rope_tables(cos.data(), sin.data(), len, D, c_.rope_local_theta, RopeScaling{});
      be_.copy_from_host(rope_local_cos_, cos.data());
      be_.copy_from_host(rope_local_sin_, sin.data());
    }
    rope_tables(cos.data(), sin.data(), len, D, c_.rope_theta, c_.rope_scaling);
    embed_scale_ = embedding_scale(c_, m.compute_dtype());
    for (int64_t l = 0; l < L; ++l) caches_.push_back({f.take(len, kv), f.take(len, kv), 0});
    x_ = f.take(1, C), y_ = f.take(1, C), rstd_ = f.take(1, 1), logits_f32_ = f.take(1, V);
    pos_row_ = f.take(1, C), mean_ = c_.layer_norm() ? f.take(1, 1) : Tensor{};
    be_.copy_from_host(rope_cos_, cos.data());
    be_.copy_from_host(rope_sin_, sin.data());

    const int64_t r = std::max<int64_t>(rank, 1);
    compute_.resize(be_, ct, sizes.t_elems + expert_rows * sizes.t_per_expert_row + C + V + r);
    ArenaCursor t(compute_.tensor());
    acts_ = carve_block_activations(t, f, 1, c_, rank, lora_on);
    acts_.moe.routing = &routing_;
    nf_ = t.take(1, C), logits_ = t.take(1, V), head_u_ = t.take(1, w_.head.rank());
    scratch_.resize(be_, ct, block_scratch_elems(c_, 1, rank));
    scratch_view_ = carve_block_scratch(scratch_.tensor(), c_, 1, rank);
    carve_block_scratch_f32(scratch_view_, f, c_, 1);
    ids_.resize(be_, DType::i32, 2);
    token_ = ids_.slice(0, 1, 1), position_ = ids_.slice(1, 1, 1);
    host_logits_.resize(size_t(V));
  }

  const std::vector<float>& step(int32_t token) override {
    if (pos >= max_len)
      fail("generation reached its context limit of " + std::to_string(max_len) + " tokens");
    check_token_ids(&token, nullptr, 1, c_.vocab_size);
    const int32_t p = int32_t(pos);
    be_.copy_from_host(token_, &token);
    be_.copy_from_host(position_, &p);
    BlockInput in{1, 1, position_, Tensor{}, rope_cos_, rope_sin_, &single_device()};
    in.rope_local_cos = rope_local_cos_, in.rope_local_sin = rope_local_sin_;
    be_.embedding_forward(x_, token_, w_.embed, 0);
    if (embed_scale_ != 1.0f) be_.scale(x_, embed_scale_);
    if (c_.learned_positions()) {
      be_.embedding_forward(pos_row_, position_, w_.positions, 0);
      be_.residual_add(x_, x_, pos_row_);
    }
    for (int64_t l = 0; l < c_.num_hidden_layers; ++l) {
      caches_[size_t(l)].position = pos;
      block_forward(be_, y_, x_, acts_, w_.blocks[size_t(l)], in, c_, scratch_view_,
                    &caches_[size_t(l)]);
      std::swap(x_, y_);
      round_to_scratch_dtype(be_, x_, scratch_view_);  // as the training runner does between blocks
    }
    norm_forward(be_, c_, nf_, mean_, rstd_, x_, w_.final_norm);
    linear_layer_forward(be_, logits_, head_u_, nf_, w_.head);
    be_.convert(logits_f32_, logits_);
    be_.copy_to_host(host_logits_.data(), logits_f32_);
    ++pos;
    return host_logits_;
  }

 private:
  const ModelConfig& c_;
  Backend& be_;
  ModelWeights w_;
  DeviceBuffer f32_, compute_, scratch_, ids_;
  Tensor rope_cos_, rope_sin_, x_, y_, rstd_, logits_f32_, nf_, logits_, head_u_, token_, position_;
  Tensor rope_local_cos_, rope_local_sin_;  // ModelConfig::rope_local_theta > 0 only
  float embed_scale_ = 1.0f;
  Tensor pos_row_, mean_;  // a learned position's row; the final LayerNorm's mean
  std::vector<KvCache> caches_;
  BlockActivations acts_;
  MoeRouting routing_;  // the token's, in an MoE layer (model/moe.h)
  BlockScratch scratch_view_;
  std::vector<float> host_logits_;
};

}  // namespace

Decoder::Decoder(Transformer& model, int64_t max_len) {
  if (max_len <= 0 || max_len > model.config().max_position_embeddings)
    fail("generation length " + std::to_string(max_len) + " must be in [1, " +
         std::to_string(model.config().max_position_embeddings) + "] (max_position_embeddings)");
  if (!model.owns_storage()) fail("generation needs the whole model on one device");
  impl_ = std::make_unique<DecoderImpl>(model, max_len);
}
Decoder::~Decoder() = default;
const std::vector<float>& Decoder::step(int32_t token) { return impl_->step(token); }
int64_t Decoder::position() const { return impl_->pos; }
int64_t Decoder::max_len() const { return impl_->max_len; }
void Decoder::reset() { impl_->pos = 0; }

}  // namespace mt
