#include "model/weights.h"

namespace mt {

namespace {

template <class T> const T* compute_ptr(const Param& p);
template <> const float* compute_ptr<float>(const Param& p) { return p.master; }
template <> const bf16* compute_ptr<bf16>(const Param& p) { return p.compute; }

template <class T>
LinearWeights<T> linear(LlamaModel& m, const std::string& name, const std::string& lora_prefix,
                        bool lora_on) {
  LinearWeights<T> w;
  Param& W = m.base().get(name);
  w.W = compute_ptr<T>(W);
  w.dW = W.grad;
  if (lora_on) {
    Param& A = m.adapters().get(lora_prefix + ".lora_A.weight");
    Param& B = m.adapters().get(lora_prefix + ".lora_B.weight");
    w.A = compute_ptr<T>(A), w.B = compute_ptr<T>(B);
    w.dA = A.grad, w.dB = B.grad;
    w.rank = m.lora_config().rank;
    w.scale = m.lora_config().alpha / float(w.rank);
  }
  return w;
}

}  // namespace

template <class T>
void bind_embedding(ModelWeights<T>& w, LlamaModel& m) {
  Param& E = m.base().get(kEmbedName);
  w.embed = E.master, w.dembed = E.grad;
  if (m.config().tie_word_embeddings)
    w.head = linear<T>(m, kEmbedName, "lm_head", lora_targets_head(m.lora_config()));
}

template <class T>
BlockWeights<T> bind_block_weights(LlamaModel& m, int64_t l) {
  const auto lora_on = lora_targets_mask(m.lora_config());
  BlockWeights<T> b;
  Param& n1 = m.base().get(layer_prefix(l) + "input_layernorm.weight");
  Param& n2 = m.base().get(layer_prefix(l) + "post_attention_layernorm.weight");
  b.norm1 = n1.master, b.dnorm1 = n1.grad, b.norm2 = n2.master, b.dnorm2 = n2.grad;
  for (int p = 0; p < kNumProj; ++p) {
    std::string name = proj_param_name(l, Proj(p));
    b.proj[p] = linear<T>(m, name + ".weight", name, lora_on[p]);
  }
  if (m.fuse_qkv()) fuse_qkv_if_adjacent(b, m.config());
  return b;
}

template <class T>
void bind_head(ModelWeights<T>& w, LlamaModel& m) {
  const LlamaConfig& c = m.config();
  Param& F = m.base().get(kFinalNormName);
  w.final_norm = F.master, w.dfinal_norm = F.grad;
  if (!c.tie_word_embeddings)
    w.head = linear<T>(m, kHeadName, "lm_head", lora_targets_head(m.lora_config()));
}

template <class T>
ModelWeights<T> bind_model_weights(LlamaModel& m) {
  ModelWeights<T> w;
  bind_embedding(w, m);
  for (int64_t l = 0; l < m.config().num_hidden_layers; ++l) w.blocks.push_back(bind_block_weights<T>(m, l));
  bind_head(w, m);
  return w;
}

#define MT_INSTANTIATE(T)                                                  \
  template ModelWeights<T> bind_model_weights<T>(LlamaModel&);            \
  template void bind_embedding<T>(ModelWeights<T>&, LlamaModel&);         \
  template BlockWeights<T> bind_block_weights<T>(LlamaModel&, int64_t);   \
  template void bind_head<T>(ModelWeights<T>&, LlamaModel&);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16)
#undef MT_INSTANTIATE

}  // namespace mt
