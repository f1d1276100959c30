// A mixture-of-experts MLP (Mixtral, Qwen3-MoE, OLMoE), in place of a block's dense MLP on the
// layers ModelConfig::moe_layer names:
//   logits = n2 Wr^T (f32)  ->  routing (model/moe_routing.h: top-k experts and weights a token)
//   x_e    = the rows of n2 routed to expert e, all experts' rows in one expert-ordered tensor
//   out_e  = down_e(silu(gate_e(x_e)) * up_e(x_e))            (each expert a SwiGLU MLP)
//   delta[n] = sum over token n's choices j of weight[n, j] * out[its row]
// The row moves are backend ops (gather_rows, combine_rows); each expert's projections are the
// model's linear layers over its rows, so LoRA adapters and NF4 bases apply to experts as to any
// projection. The routing is decided on the host (moe_routing.h says why).
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "model/arena_cursor.h"
#include "model/config.h"
#include "model/linear.h"
#include "model/model_parallel.h"
#include "model/moe_routing.h"

namespace mt {

// An expert's projections, in the order their parameters are declared.
enum ExpertProj { kExpertGate, kExpertUp, kExpertDown, kNumExpertProj };
// [out, in] of an expert projection's weight: gate and up [I, C], down [C, I].
std::pair<int64_t, int64_t> expert_proj_dims(ExpertProj p, const ModelConfig& c);

struct MoeWeights {
  LinearWeights router;  // [E, C], no bias; empty: a dense layer
  std::vector<std::array<LinearWeights, kNumExpertProj>> experts;
  explicit operator bool() const { return bool(router.W); }
};

// The rows this rank's experts may compute for N tokens of its own: their N k choices, times the
// config's expert_shards() under expert parallelism (dropless: every token of every shard may
// choose this rank's experts). With a capacity factor each shard keeps at most
// ceil(factor N k / E) of its choices for any one expert, so this rank receives at most E times
// that (each of its L experts from each of the E / L shards), and never fewer than its own N k.
int64_t moe_expert_rows(const ModelConfig& c, int64_t N);

// The forward's saved tensors for N tokens, of the compute dtype unless marked: per routed choice
// (N k rows, of which the routing's rows() are used), and per row an expert of this rank computes
// (R = moe_expert_rows: N k, or more under expert parallelism), in the order the rows arrive
// (MoeRouting::local_offsets: by source rank, then expert; this rank's own rows where its block
// falls).
struct MoeActivations {
  Tensor gate, up, h;  // [R, I]
  Tensor out;          // [N k, C] the experts' outputs (the combine's backward reads them)
  std::array<Tensor, kNumExpertProj> lora_u;  // [R, r] where the experts have adapters
  Tensor weights;      // f32 [N k] the combine weights
  Tensor slots;        // i32 [N k] each choice's expert-ordered row (-1: dropped)
  Tensor token_rows;   // i32 [N k] the token each expert-ordered row holds
  MoeRouting* routing = nullptr;  // the host's decisions, owned by the model's runner
};

// Element counts of MoeActivations (0 for a dense model): of the compute dtype, and f32 (the i32
// indices counted among them: the same size); per token (the N k choices' tensors), and per row
// this rank's experts compute (moe_expert_rows of them, which a capacity factor makes no multiple
// of N).
struct MoeActivationSizes {
  int64_t t_elems = 0, f_elems = 0;
  int64_t t_per_expert_row = 0, f_per_expert_row = 0;
};
MoeActivationSizes moe_activation_sizes(const ModelConfig& c, int64_t lora_rank,
                                            const std::array<bool, kNumExpertProj>& experts_lora);
MoeActivations carve_moe_activations(ArenaCursor& t, ArenaCursor& f, int64_t N, const ModelConfig& c,
                                     int64_t lora_rank,
                                            const std::array<bool, kNumExpertProj>& experts_lora);

// Scratch of the MoE layers (shared by all of them, not kept between forward and backward).
struct MoeScratch {
  Tensor a, b;        // [R * max(C, I, E)] of the compute dtype: expert-ordered rows
  Tensor dgate, dup;  // [R * I]
  Tensor du;          // [R * max(r, 1)]
  Tensor logits;      // f32 [N E] the router's logits, then their gradient
  Tensor dweights;    // f32 [N k]
  // Under expert parallelism, [3 R max(C, I, E)] more: the buffers that let the exchanges travel
  // while the experts compute (the backward's second send buffer and receive buffer, its dh).
  Tensor ep;
};
int64_t moe_scratch_elems(const ModelConfig& c, int64_t N, int64_t lora_rank);  // compute dtype
int64_t moe_scratch_f32_elems(const ModelConfig& c, int64_t N);
// The compute-dtype part (a, b, dgate, dup, du) and the f32 part (logits, dweights); empty for a
// dense model.
MoeScratch carve_moe_scratch(ArenaCursor& t, const ModelConfig& c, int64_t N, int64_t lora_rank);
void carve_moe_scratch_f32(MoeScratch& s, ArenaCursor& f32, const ModelConfig& c, int64_t N);

// What the losses on the routing need from the whole forward (model/moe_routing.h): the
// statistics the forward gathers over all MoE layers, and the scale the model's loss has.
struct MoeLossContext {
  MoeBalanceStats* gather = nullptr;       // forward: add this layer's statistics (null: not)
  const uint8_t* counted = nullptr;        // [N] the tokens the losses count (null: every one)
  const MoeBalanceStats* stats = nullptr;  // backward: the forward's, complete
  double loss_scale = 0.0;                 // backward: the losses' factor (as the model loss's)
};

// delta [N, C] (compute dtype) = the MoE MLP of n2 [N, C] (compute dtype, whole rows). Under
// expert parallelism (c.expert_shards() > 1) the rows travel through `par`'s exchanges.
void moe_forward(Backend& be, const Tensor& delta, const Tensor& n2, const MoeActivations& a,
                 const MoeWeights& w, const ModelConfig& c, const MoeScratch& s,
                 const MoeLossContext& loss, ModelParallel& par);
// dn2 [N, C] (compute dtype) = the gradient of n2 from ddelta [N, C] (compute dtype), the
// router's included; weight gradients accumulate.
void moe_backward(Backend& be, const Tensor& dn2, const Tensor& ddelta, const Tensor& n2,
                  const MoeActivations& a, const MoeWeights& w, const ModelConfig& c,
                  const MoeScratch& s, const MoeLossContext& loss, ModelParallel& par);

}  // namespace mt
