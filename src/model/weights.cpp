#include "model/weights.h"

namespace mt {

namespace {

LinearWeights linear(LlamaModel& m, const std::string& name, const std::string& lora_prefix,
                     bool lora_on) {
  LinearWeights w;
  Param& W = m.base().get(name);
  w.W = W.gemm_tensor();
  w.dW = W.grad_tensor();
  if (lora_on) {
    Param& A = m.adapters().get(lora_prefix + ".lora_A.weight");
    Param& B = m.adapters().get(lora_prefix + ".lora_B.weight");
    w.A = A.gemm_tensor(), w.B = B.gemm_tensor();
    w.dA = A.grad_tensor(), w.dB = B.grad_tensor();
    w.scale = m.lora_config().scale();
  }
  return w;
}

}  // namespace

void bind_embedding(ModelWeights& w, LlamaModel& m) {
  Param& E = m.base().get(kEmbedName);
  w.embed = E.master_tensor(), w.dembed = E.grad_tensor();
  if (m.config().tie_word_embeddings)
    w.head = linear(m, kEmbedName, "lm_head", lora_targets_head(m.lora_config()));
}

BlockWeights bind_block_weights(LlamaModel& m, int64_t l) {
  const auto lora_on = lora_targets_mask(m.lora_config());
  BlockWeights b;
  const LlamaConfig& c = m.config();
  Param& n1 = m.base().get(layer_prefix(l) + "input_layernorm.weight");
  Param& n2 = m.base().get(layer_prefix(l) + mlp_norm_name(c));
  b.norm1 = n1.master_tensor(), b.dnorm1 = n1.grad_tensor();
  b.norm2 = n2.master_tensor(), b.dnorm2 = n2.grad_tensor();
  if (c.post_norms) {  // Gemma: HF's post_attention_layernorm is the norm of the attention's output
    Param& pa = m.base().get(layer_prefix(l) + "post_attention_layernorm.weight");
    Param& pm = m.base().get(layer_prefix(l) + "post_feedforward_layernorm.weight");
    b.post_attn_norm = pa.master_tensor(), b.dpost_attn_norm = pa.grad_tensor();
    b.post_mlp_norm = pm.master_tensor(), b.dpost_mlp_norm = pm.grad_tensor();
  }
  for (int p = 0; p < kNumProj; ++p) {
    std::string name = proj_param_name(l, Proj(p));
    b.proj[p] = linear(m, name + ".weight", name, lora_on[p]);
    if (proj_has_bias(Proj(p), c)) {
      Param& bias = m.base().get(name + ".bias");
      b.proj[p].b = bias.master_tensor().view(1, bias.numel), b.proj[p].db = bias.grad_tensor();
    }
  }
  if (c.qk_norm) {
    Param& qn = m.base().get(head_norm_name(l, kQ));
    Param& kn = m.base().get(head_norm_name(l, kK));
    b.q_norm = qn.master_tensor(), b.dq_norm = qn.grad_tensor();
    b.k_norm = kn.master_tensor(), b.dk_norm = kn.grad_tensor();
  }
  b.window = c.attention_window(l);
  b.local_rope = c.local_rope(l);
  if (m.fuse_qkv()) fuse_qkv_if_adjacent(b, m.config());
  return b;
}

void bind_head(ModelWeights& w, LlamaModel& m) {
  const LlamaConfig& c = m.config();
  Param& F = m.base().get(kFinalNormName);
  w.final_norm = F.master_tensor(), w.dfinal_norm = F.grad_tensor();
  if (!c.tie_word_embeddings)
    w.head = linear(m, kHeadName, "lm_head", lora_targets_head(m.lora_config()));
}

ModelWeights bind_model_weights(LlamaModel& m) {
  ModelWeights w;
  bind_embedding(w, m);
  for (int64_t l = 0; l < m.config().num_hidden_layers; ++l)
    w.blocks.push_back(bind_block_weights(m, l));
  bind_head(w, m);
  return w;
}

}  // namespace mt
