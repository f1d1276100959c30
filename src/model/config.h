// The decoder's hyper-parameters, named as in HF's config.json: the LLaMA architecture, and the
// choices by which the families built on it differ (model/families.md in docs/model-families.md).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/rope_frequencies.h"

namespace mt {

struct ModelConfig {
  int64_t hidden_size = 256;
  int64_t intermediate_size = 688;
  int64_t num_hidden_layers = 4;
  int64_t num_attention_heads = 8;
  int64_t num_key_value_heads = 4;
  int64_t vocab_size = 256;
  int64_t max_position_embeddings = 2048;
  float rms_norm_eps = 1e-5f;
  float rope_theta = 500000.0f;
  RopeScaling rope_scaling;  // factor 0: no scaling
  bool tie_word_embeddings = false;
  // 0: hidden_size / num_attention_heads (every LLaMA). Set when the heads do not span the hidden
  // size, as in a tensor-parallel rank's share of the model (its heads, the full hidden size).
  int64_t head_dim_override = 0;

  // ---- What the family's block is made of (all off: LLaMA). The one block (model/block.h) reads
  // these; no family has its own copy of it.
  // HF model_type the config came from ("llama", "qwen2", "qwen3", "mistral"): which keys an HF
  // export writes back. The math is in the fields below, never in this name.
  std::string model_type = "llama";
  bool qkv_bias = false;  // biases on q_proj, k_proj, v_proj (Qwen2; HF attention_bias)
  bool o_bias = false;    // a bias on o_proj (HF attention_bias in llama and qwen3, not qwen2)
  bool mlp_bias = false;  // biases on gate_proj, up_proj, down_proj (HF mlp_bias)
  // RMSNorm over each head of q and of k before RoPE, weights [head_dim] (Qwen3 q_norm/k_norm).
  bool qk_norm = false;
  // With qk_norm: each norm spans a token's whole q (or k) projection instead of each head, its
  // weight [q_dim] (or [kv_dim]) (OLMoE's q_norm / k_norm, applied before the heads are split).
  bool qk_norm_whole = false;
  // Each layer's attention window (Mistral sliding_window; Qwen2 above max_window_layers): query
  // i sees key j only when i - w < j <= i. Empty: no layer has one; else one entry per layer,
  // 0 for full attention.
  std::vector<int64_t> layer_window;
  // GPT-2's parts (all three chosen together by its loader; each read where it applies):
  // the norms (input, post-attention, final) are LayerNorms with a bias, eps rms_norm_eps (HF
  // layer_norm_epsilon); the MLP is up -> GeLU (tanh) -> down with no gate (HF c_fc, c_proj);
  // positions come from a learned table of max_position_embeddings rows (HF wpe, n_positions)
  // added to the token embedding, and no RoPE is applied.
  enum class Norm { rms, layer };
  enum class Mlp { swiglu, gelu };
  enum class Positions { rope, learned };
  Norm norm = Norm::rms;
  Mlp mlp = Mlp::swiglu;
  Positions positions = Positions::rope;

  // ---- Gemma 3's parts (docs/model-families.md, "Gemma 3"); all off for the other families.
  // Every RMSNorm (the layers', q/k norms, the final norm) scales by (norm_weight_offset + w):
  // Gemma stores its norm weights as w and applies 1 + w.
  float norm_weight_offset = 0.0f;
  // A norm on the attention's and on the MLP's output before each is added to the residual
  // stream (Gemma's post_attention_layernorm and post_feedforward_layernorm).
  bool post_norms = false;
  // The MLP's gate through the tanh-approximated GeLU instead of SiLU (GeGLU; Gemma's
  // hidden_activation gelu_pytorch_tanh).
  bool geglu = false;
  // The embedding lookup times sqrt(hidden_size), that factor rounded to the compute dtype first
  // (as transformers' Gemma3TextScaledWordEmbedding). The tied head reads the unscaled table.
  bool scale_embeddings = false;
  // > 0: the attention scores' scale (Gemma: query_pre_attn_scalar^-1/2); 0: 1/sqrt(head_dim).
  float attention_scale = 0.0f;
  // > 0: the layers with an attention window rotate with this RoPE base and no rope_scaling
  // (Gemma's rope_local_base_freq); the others with rope_theta and rope_scaling.
  float rope_local_theta = 0.0f;

  // ---- Mixture of experts (Mixtral, Qwen3-MoE, OLMoE; docs/model-families.md): num_experts > 0
  // replaces the MLP of the layers moe_layer() names by a router (a linear layer without bias,
  // [num_experts, hidden_size]) and num_experts SwiGLU experts of moe_intermediate_size, each
  // token through num_experts_per_tok of them (model/moe.h, routing in model/moe_routing.h).
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 2;
  int64_t moe_intermediate_size = 0;
  // The chosen experts' weights renormalised to sum to 1 (Mixtral always, Qwen3-MoE's
  // norm_topk_prob; OLMoE's false).
  bool norm_topk_prob = true;
  // Which layers are MoE: every decoder_sparse_step-th (layer l when (l + 1) % step == 0), except
  // those listed in mlp_only_layers, which keep the dense MLP (Qwen3-MoE's keys; 1 and none for
  // Mixtral and OLMoE).
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;
  // The load-balancing loss's coefficient, added to the loss only with output_router_logits (as
  // transformers does: its configs ship it false), and the router z-loss's (meshtrain's; 0: none).
  bool output_router_logits = false;
  float router_aux_loss_coef = 0.001f;
  float router_z_loss_coef = 0.0f;
  // > 0: each expert takes at most ceil(factor * tokens * k / experts) of a layer's choices, the
  // rest dropped (counted and logged); 0: dropless (every choice computed).
  float moe_capacity_factor = 0.0f;
  // Expert parallelism (set by the parallel layer on the model of one rank, never read from a
  // file; parallel/expert_parallel.h): this model holds and computes experts
  // [moe_expert_begin, + local_experts()) of num_experts and exchanges the rows routed to the
  // others' with expert_shards() - 1 other ranks. 0: every expert here.
  int64_t moe_expert_begin = 0;
  int64_t moe_local_experts = 0;
  // Tensor parallelism (set by the parallel layer on the model of one rank, never read from a
  // file; parallel/tensor_parallel.h): the attention's heads are split into head_shards equal
  // shares and this model computes share head_shard (its num_attention_heads and
  // num_key_value_heads are one share's). Only a whole-projection q/k norm (qk_norm_whole) looks
  // past its share: it normalises over every share's columns, so its weights are whole (this
  // model reads its columns from head_shard's on) and its row statistics are summed over the
  // shares (ModelParallel::reduce_sum). 1: every head here.
  int64_t head_shards = 1;
  int64_t head_shard = 0;

  bool moe() const { return num_experts > 0; }
  int64_t local_experts() const { return moe_local_experts > 0 ? moe_local_experts : num_experts; }
  int64_t expert_shards() const { return moe() ? num_experts / local_experts() : 1; }
  bool moe_layer(int64_t layer) const {
    if (num_experts <= 0 || decoder_sparse_step <= 0 || (layer + 1) % decoder_sparse_step != 0) return false;
    for (int64_t l : mlp_only_layers)
      if (l == layer) return false;
    return true;
  }
  // The coefficient the load-balancing loss enters the loss with (0 unless output_router_logits).
  float aux_loss_coef() const { return output_router_logits ? router_aux_loss_coef : 0.0f; }
  // Whether a pass adds routing losses (load balancing or z-loss): their statistics then span every
  // MoE layer of the pass (model/moe_routing.h).
  bool routing_losses() const { return moe() && (aux_loss_coef() > 0.0f || router_z_loss_coef > 0.0f); }

  int64_t head_dim() const { return head_dim_override > 0 ? head_dim_override : hidden_size / num_attention_heads; }
  int64_t q_dim() const { return head_dim() * num_attention_heads; }  // query / attention width
  // The widths the q and k norms normalise over (their weights' sizes): a head's, or with
  // qk_norm_whole the whole projection's, every head share's together (head_shards).
  int64_t q_norm_width() const { return qk_norm_whole ? q_dim() * head_shards : head_dim(); }
  int64_t k_norm_width() const { return qk_norm_whole ? kv_dim() * head_shards : head_dim(); }
  int64_t kv_dim() const { return head_dim() * num_key_value_heads; }
  bool layer_norm() const { return norm == Norm::layer; }
  bool gelu_mlp() const { return mlp == Mlp::gelu; }
  bool learned_positions() const { return positions == Positions::learned; }
  int64_t attention_window(int64_t layer) const {
    return layer_window.empty() ? 0 : layer_window[size_t(layer)];
  }
  // Whether layer `layer` rotates with the local RoPE tables (rope_local_theta).
  bool local_rope(int64_t layer) const { return rope_local_theta > 0.0f && attention_window(layer) > 0; }

  // Throws mt::Error naming the offending key when the shape is inconsistent
  // (heads not dividing hidden size, KV heads not dividing heads, odd head_dim, sizes <= 0, a
  // window list of another length than the layers, a negative window).
  void validate() const;
};

// GPT-2's block (model_type "gpt2"): LayerNorms with biases, the GeLU MLP, learned positions,
// biases on every projection, one KV head per head, the head tied to the embedding. The loader
// (io/gpt2_config.h) and the presets (model/presets.h) describe GPT-2 through this one place.
void use_gpt2_block(ModelConfig& c);

}  // namespace mt
