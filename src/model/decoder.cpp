#include "model/decoder.h"

#include <algorithm>

#include "core/buffer.h"
#include "core/error.h"
#include "kernels/cpu/decode_attention.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/residual.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/swiglu.h"
#include "model/weights.h"

namespace mt {

struct Decoder::Impl {
  virtual ~Impl() = default;
  virtual const std::vector<float>& step(int32_t token) = 0;
  int64_t pos = 0, max_len = 0;
};

namespace {

template <class T>
class DecoderImpl : public Decoder::Impl {
 public:
  DecoderImpl(LlamaModel& m, int64_t len) : m_(m), c_(m.config()), w_(bind_model_weights<T>(m)) {
    max_len = len;
    const int64_t C = c_.hidden_size, kv = c_.kv_dim(), I = c_.intermediate_size, D = c_.head_dim();
    const int64_t r = std::max<int64_t>(m.has_lora() ? m.lora_config().rank : 0, 1);
    cos_.resize(size_t(len * D / 2)), sin_.resize(size_t(len * D / 2));
    rope_tables(cos_.data(), sin_.data(), len, D, c_.rope_theta, c_.rope_scaling);
    k_cache_.resize(size_t(c_.num_hidden_layers * len * kv));
    v_cache_.resize(size_t(c_.num_hidden_layers * len * kv));
    x_.resize(size_t(C)), rstd_.resize(1);
    n_.resize(size_t(C)), q_.resize(size_t(C)), k_.resize(size_t(kv)), v_.resize(size_t(kv));
    att_.resize(size_t(C)), o_.resize(size_t(C)), gate_.resize(size_t(I)), up_.resize(size_t(I));
    h_.resize(size_t(I)), u_.resize(size_t(r)), logits_t_.resize(size_t(c_.vocab_size));
    logits_.resize(size_t(c_.vocab_size));
  }

  const std::vector<float>& step(int32_t token) override {
    if (pos >= max_len)
      fail("generation reached its context limit of " + std::to_string(max_len) + " tokens");
    if (token < 0 || token >= c_.vocab_size)
      fail("token id " + std::to_string(token) + " is outside the vocabulary [0, " +
           std::to_string(c_.vocab_size) + ")");
    const int64_t C = c_.hidden_size, kv = c_.kv_dim(), I = c_.intermediate_size;
    const int64_t Hq = c_.num_attention_heads, Hkv = c_.num_key_value_heads, D = c_.head_dim();
    const int32_t p = int32_t(pos);
    embedding_forward(x_.data(), &token, w_.embed, 1, C);
    for (int64_t l = 0; l < c_.num_hidden_layers; ++l) {
      const BlockWeights<T>& b = w_.blocks[size_t(l)];
      rmsnorm_forward(n_.data(), rstd_.data(), x_.data(), b.norm1, 1, C, c_.rms_norm_eps);
      linear_layer_forward(q_.data(), u_.data(), n_.data(), b.proj[kQ], 1, C, C);
      linear_layer_forward(k_.data(), u_.data(), n_.data(), b.proj[kK], 1, kv, C);
      linear_layer_forward(v_.data(), u_.data(), n_.data(), b.proj[kV], 1, kv, C);
      rope_forward(q_.data(), cos_.data(), sin_.data(), &p, 1, Hq, D);
      rope_forward(k_.data(), cos_.data(), sin_.data(), &p, 1, Hkv, D);
      float* kc = k_cache_.data() + l * max_len * kv;
      float* vc = v_cache_.data() + l * max_len * kv;
      for (int64_t i = 0; i < kv; ++i)
        kc[pos * kv + i] = to_float(k_[size_t(i)]), vc[pos * kv + i] = to_float(v_[size_t(i)]);
      decode_attention(att_.data(), q_.data(), kc, vc, pos + 1, Hq, Hkv, D);
      linear_layer_forward(o_.data(), u_.data(), att_.data(), b.proj[kO], 1, C, C);
      residual_add(x_.data(), x_.data(), o_.data(), C);
      rmsnorm_forward(n_.data(), rstd_.data(), x_.data(), b.norm2, 1, C, c_.rms_norm_eps);
      linear_layer_forward(gate_.data(), u_.data(), n_.data(), b.proj[kGate], 1, I, C);
      linear_layer_forward(up_.data(), u_.data(), n_.data(), b.proj[kUp], 1, I, C);
      swiglu_forward(h_.data(), gate_.data(), up_.data(), I);
      linear_layer_forward(o_.data(), u_.data(), h_.data(), b.proj[kDown], 1, C, I);
      residual_add(x_.data(), x_.data(), o_.data(), C);
    }
    rmsnorm_forward(n_.data(), rstd_.data(), x_.data(), w_.final_norm, 1, C, c_.rms_norm_eps);
    linear_layer_forward(logits_t_.data(), u_.data(), n_.data(), w_.head, 1, c_.vocab_size, C);
    for (int64_t i = 0; i < c_.vocab_size; ++i) logits_[size_t(i)] = to_float(logits_t_[size_t(i)]);
    ++pos;
    return logits_;
  }

 private:
  LlamaModel& m_;
  const LlamaConfig& c_;
  ModelWeights<T> w_;
  std::vector<float> cos_, sin_, k_cache_, v_cache_, x_, rstd_, logits_;
  std::vector<T> n_, q_, k_, v_, att_, o_, gate_, up_, h_, u_, logits_t_;
};

}  // namespace

Decoder::Decoder(LlamaModel& model, int64_t max_len) {
  if (max_len <= 0 || max_len > model.config().max_position_embeddings)
    fail("generation length " + std::to_string(max_len) + " must be in [1, " +
         std::to_string(model.config().max_position_embeddings) + "] (max_position_embeddings)");
  if (model.precision() == Precision::bf16) impl_ = std::make_unique<DecoderImpl<bf16>>(model, max_len);
  else impl_ = std::make_unique<DecoderImpl<float>>(model, max_len);
}
Decoder::~Decoder() = default;
const std::vector<float>& Decoder::step(int32_t token) { return impl_->step(token); }
int64_t Decoder::position() const { return impl_->pos; }
int64_t Decoder::max_len() const { return impl_->max_len; }
void Decoder::reset() { impl_->pos = 0; }

}  // namespace mt
