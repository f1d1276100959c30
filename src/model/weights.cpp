#include "model/weights.h"

namespace mt {

namespace {

LinearWeights linear(Transformer& m, const std::string& name, const std::string& lora_prefix,
                     bool lora_on, const std::string& a_name = "") {
  LinearWeights w;
  Param& W = m.base().get(name);
  w.W = W.gemm_tensor();
  w.dW = W.grad_tensor();
  if (lora_on) {
    Param& A = m.adapters().get(a_name.empty() ? lora_prefix + ".lora_A.weight" : a_name);
    Param& B = m.adapters().get(lora_prefix + ".lora_B.weight");
    w.A = A.gemm_tensor(), w.B = B.gemm_tensor();
    w.dA = A.grad_tensor(), w.dB = B.grad_tensor();
    w.scale = m.lora_config().scale();
  }
  return w;
}

// A norm's weight, and its bias where the family's norm has one (LayerNorm).
NormWeights norm_weights(Transformer& m, const std::string& prefix) {
  NormWeights n;
  Param& W = m.base().get(prefix + ".weight");
  n.w = W.master_tensor(), n.dw = W.grad_tensor();
  if (m.config().layer_norm()) {
    Param& B = m.base().get(prefix + ".bias");
    n.b = B.master_tensor(), n.db = B.grad_tensor();
  }
  return n;
}

}  // namespace

void bind_embedding(ModelWeights& w, Transformer& m, bool adapters) {
  // The lookups read the f32 master, or a frozen table's bf16 copy (its only one under bf16).
  // A trained embedding (LoraConfig::train_embeddings) reads and trains its copy in the base's place.
  const bool copy = adapters && m.lora_config().enabled && m.lora_config().train_embeddings;
  Param& E = copy ? m.adapters().get(kEmbedCopyName) : m.base().get(kEmbedName);
  w.embed = E.master ? E.master_tensor() : E.compute_tensor(), w.dembed = E.grad_tensor();
  if (m.config().learned_positions()) {
    Param& P = m.base().get(kPositionEmbedName);
    w.positions = P.master ? P.master_tensor() : P.compute_tensor(), w.dpositions = P.grad_tensor();
  }
  if (m.config().tie_word_embeddings) {
    w.head = linear(m, kEmbedName, "lm_head", adapters && lora_targets_head(m.lora_config()));
    if (copy) w.head.W = E.gemm_tensor(), w.head.dW = E.grad_tensor();  // tied to the copy
  }
}

BlockWeights bind_block_weights(Transformer& m, int64_t l, bool adapters) {
  const auto lora_on = adapters ? lora_targets_mask(m.lora_config()) : std::array<bool, kNumProj>{};
  BlockWeights b;
  const ModelConfig& c = m.config();
  b.norm1 = norm_weights(m, layer_prefix(l) + "input_layernorm");
  const std::string mlp_norm = mlp_norm_name(c);  // "....weight"
  b.norm2 = norm_weights(m, layer_prefix(l) + mlp_norm.substr(0, mlp_norm.size() - 7));
  if (c.post_norms) {  // Gemma: HF's post_attention_layernorm is the norm of the attention's output
    b.post_attn_norm = norm_weights(m, layer_prefix(l) + "post_attention_layernorm");
    b.post_mlp_norm = norm_weights(m, layer_prefix(l) + "post_feedforward_layernorm");
  }
  const bool moe = c.moe_layer(l);
  for (int p = 0; p < kNumProj; ++p) {
    if (!proj_exists(Proj(p), c) || (moe && p >= kGate)) continue;
    std::string name = proj_param_name(l, Proj(p));
    b.proj[p] = linear(m, name + ".weight", name, lora_on[p], lora_a_name(l, Proj(p), m.lora_config()));
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
  if (moe) {
    b.moe.router = linear(m, moe_router_name(l, c), "", false);
    if (adapters && m.lora_config().enabled && m.lora_config().train_router) {  // the trainable copy in its place
      Param& copy = m.adapters().get(moe_router_copy_name(l, c));
      b.moe.router.W = copy.gemm_tensor(), b.moe.router.dW = copy.grad_tensor();
    }
    const bool expert_on[kNumExpertProj] = {lora_on[kGate], lora_on[kUp], lora_on[kDown]};
    b.moe.experts.resize(size_t(c.local_experts()));  // this rank's, under expert parallelism
    for (int64_t j = 0; j < c.local_experts(); ++j)
      for (int p = 0; p < kNumExpertProj; ++p) {
        const std::string name = expert_param_name(l, c.moe_expert_begin + j, ExpertProj(p), c);
        b.moe.experts[size_t(j)][size_t(p)] = linear(m, name + ".weight", name, expert_on[p]);
      }
  }
  b.window = c.attention_window(l);
  b.local_rope = c.local_rope(l);
  if (m.fuse_qkv()) fuse_qkv_if_adjacent(b, m.config());
  return b;
}

void bind_head(ModelWeights& w, Transformer& m, bool adapters) {
  const ModelConfig& c = m.config();
  w.final_norm = norm_weights(m, kFinalNormPrefix);
  if (!c.tie_word_embeddings) {
    w.head = linear(m, kHeadName, "lm_head", adapters && lora_targets_head(m.lora_config()));
    if (adapters && m.lora_config().enabled && m.lora_config().train_embeddings) {
      Param& copy = m.adapters().get(kHeadCopyName);
      w.head.W = copy.gemm_tensor(), w.head.dW = copy.grad_tensor();
    }
  }
}

ModelWeights bind_model_weights(Transformer& m, bool adapters) {
  ModelWeights w;
  bind_embedding(w, m, adapters);
  for (int64_t l = 0; l < m.config().num_hidden_layers; ++l)
    w.blocks.push_back(bind_block_weights(m, l, adapters));
  bind_head(w, m, adapters);
  return w;
}

}  // namespace mt
