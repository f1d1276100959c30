// One transformer block of the LLaMA family, forward and backward, for one device:
//   x2 = x + o_proj(attention(rope(qn(q_proj(n1))), rope(kn(k_proj(n1))), v_proj(n1))),  n1 = norm1(x)
//   y  = x2 + down_proj(silu(gate_proj(n2)) * up_proj(n2)),                              n2 = norm2(x2)
// The config chooses the family's parts: biases on the projections (Qwen2), per-head RMSNorms
// qn / kn of q and k (Qwen3; identity otherwise), a sliding attention window per layer (Mistral),
// and GPT-2's: LayerNorms with a bias for norm1 / norm2 (model/norm.h), no RoPE (its positions
// are learned and added before the first block), and the MLP y = x2 + down_proj(gelu(up_proj(n2)))
// with no gate_proj (HF c_fc is up_proj, c_proj is down_proj).
// Gemma 3 adds: every norm scaling by (1 + w) (ModelConfig::norm_weight_offset, applied by
// model/norm.h), a norm on the attention's and on the MLP's output before each residual add
// (o_proj(...) and down_proj(...) above go through them), GeGLU in place of SwiGLU
// (gelu_tanh(gate) * up), its attention scale, and local RoPE tables on windowed layers.
// The residual stream (x, x2, y) and its gradient are f32; everything feeding a GEMM is of the
// compute dtype (f32, or bf16 in mixed precision). The ops run on whichever backend is passed in.
#pragma once
#include <array>
#include <cstdint>
#include <utility>

#include "backend/backend.h"
#include "model/config.h"
#include "model/context_attention.h"
#include "model/arena_cursor.h"
#include "model/linear.h"
#include "model/model_parallel.h"
#include "model/moe.h"
#include "model/norm.h"

namespace mt {

enum Proj { kQ, kK, kV, kO, kGate, kUp, kDown, kNumProj };
const char* proj_name(Proj p);  // "q", "k", ..., as LoRA targets are named
// [out, in] of each projection's weight: q [q_dim, C], k/v [kv_dim, C], o [C, q_dim], ...
std::pair<int64_t, int64_t> proj_dims(Proj p, const ModelConfig& c);
// Whether the family gives projection p a bias (ModelConfig::qkv_bias, o_bias, mlp_bias).
bool proj_has_bias(Proj p, const ModelConfig& c);
// Whether the family's block has projection p at all (a GeLU MLP has no gate_proj).
bool proj_exists(Proj p, const ModelConfig& c);

struct BlockWeights {
  NormWeights norm1, norm2;  // f32 [1, C] (a LayerNorm's bias too); gradients empty when frozen
  std::array<LinearWeights, kNumProj> proj;
  // When q, k and v are adjacent in memory they form one [q_dim + 2kv, C] matrix: one GEMM instead
  // of three (the k and v products alone are narrow and run well below the GEMM peak).
  Tensor qkv, dqkv;  // dqkv empty when frozen
  Tensor q_norm, dq_norm, k_norm, dk_norm;  // f32 [1, D] (ModelConfig::qk_norm), else empty
  int64_t window = 0;  // this layer's attention window (ModelConfig::attention_window)
  // Gemma's post_attention_layernorm and post_feedforward_layernorm (ModelConfig::post_norms):
  // f32 [1, C], else empty; gradients empty when frozen. Norms of the family's kind (model/norm.h).
  NormWeights post_attn_norm, post_mlp_norm;
  bool local_rope = false;  // rotates with BlockInput's local tables (ModelConfig::local_rope)
  // A mixture-of-experts layer (ModelConfig::moe_layer): its router and experts, in place of the
  // gate, up and down projections (then empty); empty on a dense layer.
  MoeWeights moe;
};

// Sets w.qkv / w.dqkv when the three projections' weights (and gradients) are contiguous.
void fuse_qkv_if_adjacent(BlockWeights& w, const ModelConfig& c);

// Everything the backward needs from the forward, for one block: [N, per-token size] views, of
// the compute dtype unless marked f32.
struct BlockActivations {
  Tensor n1;     // [C]
  Tensor rstd1;  // [1]   f32
  Tensor q;      // [qd]  after RoPE
  Tensor k;      // [kv]  after RoPE
  Tensor v;      // [kv]
  Tensor att;    // [qd]  attention output (input of o_proj)
  Tensor lse;    // [Hq]  f32, per query row
  Tensor x2;     // [C]   f32, residual after attention
  Tensor n2;     // [C]
  Tensor rstd2;  // [1]   f32
  Tensor gate;   // [I]   (SwiGLU MLP only, else empty)
  Tensor up;     // [I]
  Tensor h;      // [I]
  std::array<Tensor, kNumProj> lora_u;  // [r] each, empty where no adapter
  // With q/k norms only (else empty), f32: q and k before their norm, and the norms' rstd.
  Tensor q_raw;   // [qd]
  Tensor k_raw;   // [kv]
  Tensor rstd_q;  // [Hq]
  Tensor rstd_k;  // [Hkv]
  // With post norms only (else empty), f32: the attention's and the MLP's outputs before their
  // norm, and those norms' rstd.
  Tensor attn_raw;       // [C]
  Tensor mlp_raw;        // [C]
  Tensor rstd_post_attn; // [1]
  Tensor rstd_post_mlp;  // [1]
  // With LayerNorms only (else empty), f32: each norm's row mean.
  Tensor mean1;  // [1]
  Tensor mean2;  // [1]
  // A mixture-of-experts layer's (model/moe.h); empty in a dense model.
  MoeActivations moe;
};

// Element counts of BlockActivations (per token, and per expert row), so an arena can be planned
// up front (the memory planner reads them too).
struct BlockActivationSizes {
  int64_t t_elems;  // elements of the compute dtype
  int64_t f_elems;  // f32 elements
  // Of those, the ones on the residual stream's rows (the norms' outputs and statistics, the
  // residual after attention, the post norms' inputs), which sequence parallelism holds for its
  // share of the rows only (ModelParallel::sequence_shards).
  int64_t t_split = 0, f_split = 0;
  // Besides those per token, a mixture of experts' tensors per row this rank's experts compute:
  // moe_expert_rows(c, N) of them for N tokens (model/moe.h), no multiple of N under a capacity.
  int64_t t_per_expert_row = 0, f_per_expert_row = 0;
};
BlockActivationSizes block_activation_sizes(const ModelConfig& c, int64_t lora_rank,
                                            const std::array<bool, kNumProj>& lora_on);
// Carves one block's activations for N tokens from a compute-dtype and an f32 arena: the
// residual stream's (BlockActivationSizes::t_split, f_split) for `residual_rows` of them (a
// sequence-parallel share; 0: all N).
BlockActivations carve_block_activations(ArenaCursor& t_arena, ArenaCursor& f_arena, int64_t N,
                                         const ModelConfig& c, int64_t lora_rank,
                                         const std::array<bool, kNumProj>& lora_on,
                                         int64_t residual_rows = 0);

// Scratch shared by all blocks (not saved between forward and backward), flat regions of the
// compute dtype that ops view at the width they need.
struct BlockScratch {
  Tensor t0, t1, t2;  // [N * max(C, qd, I)]
  Tensor t3;          // [N * C]
  Tensor t4, t5;      // [N * kv]
  Tensor qkv;         // [N * (qd + 2kv)]
  Tensor du;          // [N * max(r, 1)]
  // With adapters and no LoRA dropout: the batched adapters' staging (model/linear.h, lora_group_*), for
  // q, k and v at most; else empty.
  Tensor lora_group;
  Tensor dropped;     // [N * max(C, qd, I)] with LoRA dropout (an adapter's input), else empty
  // f32, with q/k norms only (else empty): the gradient of q or k before its norm, and a norm
  // weight's gradient before it is summed over tensor-parallel ranks (each holds some heads).
  Tensor dqk_raw;     // [N * qd]
  Tensor dnorm_part;  // [D]
  Tensor dnorm_rows;  // [N]: a split whole-projection q/k norm's row dots (ModelConfig::head_shards > 1)
  // f32, with post norms only (else empty): the gradient of an output before its post norm.
  Tensor dpost_raw;   // [N * C]
  // Under sequence parallelism only (else empty): a norm's output or the residual's gradient
  // gathered whole from the ranks' shares, the input of a tensor-parallel region.
  Tensor whole;       // [N * C]
  MoeScratch moe;     // a mixture-of-experts model's (model/moe.h), else empty
};
// `sequence_split`: room for BlockScratch::whole.
int64_t block_scratch_elems(const ModelConfig& c, int64_t N, int64_t lora_rank, bool lora_dropout = false,
                            bool sequence_split = false);
// x [N, C] f32, a block's output (the residual stream between blocks) or its gradient, rounded in
// place to the scratch's dtype (the compute dtype; nothing to do in f32) through its t3, which is
// free between blocks. The model does it wherever a pipeline may cut it, on every layout, so a
// stage can keep and send those tensors in bf16 and compute what one rank computes.
void round_to_scratch_dtype(Backend& be, const Tensor& x, const BlockScratch& s);
BlockScratch carve_block_scratch(const Tensor& arena, const ModelConfig& c, int64_t N,
                                 int64_t lora_rank, bool lora_dropout = false, bool sequence_split = false);
// The f32 part of the scratch (q/k norms' and post norms' backward; 0 elements for a family
// without them),
// carved into s from an f32 arena.
int64_t block_scratch_f32_elems(const ModelConfig& c, int64_t N);
void carve_block_scratch_f32(BlockScratch& s, ArenaCursor& f32, const ModelConfig& c, int64_t N);


struct BlockInput {
  int64_t B, T;
  Tensor positions;  // i32 [B*T]
  Tensor segments;   // i32 [B*T], or empty: one document per row
  Tensor rope_cos;   // f32 [max_pos, D/2]
  Tensor rope_sin;
  ModelParallel* parallel;  // tensor-parallel reductions (a no-op ModelParallel on one device)
  // LoRA dropout in a training pass: each projection's mask (AdapterDropout in model/linear.h),
  // with the scratch's `dropped`; null: none (evaluation, or lora.dropout = 0).
  const std::array<DropoutMask, kNumProj>* lora_dropout = nullptr;
  // The tables of the layers with local RoPE (BlockWeights::local_rope; Gemma's sliding layers),
  // like rope_cos / rope_sin; empty when no layer has them.
  Tensor rope_local_cos = {}, rope_local_sin = {};
  // Context parallelism: attention over the whole rows of which this input holds a share; null:
  // the rows are whole (the backend's attention).
  ContextAttention* context = nullptr;
  // Mixture of experts: the routing losses' statistics over the whole forward (model/moe.h).
  MoeLossContext moe_loss = {};
};

// The factor the embedding lookup is multiplied by: sqrt(hidden_size) rounded to the compute
// dtype when ModelConfig::scale_embeddings (as transformers rounds Gemma's), else 1.
float embedding_scale(const ModelConfig& c, DType compute);

// Decoding one token: a layer's keys (after RoPE) and values of every position so far, f32
// [max_len, kv]; the new token's go to row `position` and it attends to rows [0, position].
struct KvCache {
  Tensor k, v;
  int64_t position = 0;
};

// y = block(x). y and x are [N, C] f32 and may not alias; under sequence parallelism (the
// parallel layer's sequence_shards() S > 1) they are this rank's N / S rows of the residual
// stream, as are the norms' saved outputs and statistics and the residual after attention, while
// the tensor-parallel regions between them (projections, attention, MLP) run on all N rows: their
// inputs are gathered, their outputs summed and scattered (ModelParallel::sum_scatter_rows), and
// the scratch must have been carved with `sequence_split`. The norms' weight gradients are then
// this rank's rows' share, for the parallel layer to sum over the ranks. With a cache (N == 1) the attention
// reads the cache instead of the batch.
void block_forward(Backend& be, const Tensor& y, const Tensor& x, const BlockActivations& a,
                   const BlockWeights& w, const BlockInput& in, const ModelConfig& c,
                   const BlockScratch& s, const KvCache* cache = nullptr);

// On entry dy holds dL/dy; on exit it holds dL/dx (updated in place). Weight grads accumulate.
// Rows as block_forward's.
void block_backward(Backend& be, const Tensor& dy, const Tensor& x, const BlockActivations& a,
                    const BlockWeights& w, const BlockInput& in, const ModelConfig& c,
                    const BlockScratch& s);

}  // namespace mt
