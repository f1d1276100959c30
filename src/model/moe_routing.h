// A mixture-of-experts layer's routing, on the host: which experts each token goes to and with
// what weight, the order the experts' rows are laid out in, and the router's gradient. The
// decisions are made on the host on every backend: a dropless layer's GEMM sizes (the rows each
// expert receives) must be known there anyway, and one implementation keeps every backend's
// choices identical (ties included). Everything is a function of the router's logits alone.
//
// The math is each family's Hugging Face code (transformers 4.x modeling_mixtral.py,
// modeling_qwen3_moe.py, modeling_olmoe.py), in double and rounded once to f32:
//   p = softmax(logits) over the experts; the k largest (ties: the lower expert index first, the
//   order torch.topk gives on the CPU, though PyTorch does not promise one); weights = those p,
//   divided by their sum when `renormalize` (Mixtral always; Qwen3-MoE with norm_topk_prob;
//   OLMoE's default never).
// The load-balancing loss (HF load_balancing_loss_func, over the MoE layers of one forward):
//   aux = E * sum_e f_e P_e,  f_e = (choices of e over the layers' counted tokens and their k) /
//   (counted tokens * layers),  P_e = (sum of p_e over those tokens) / (counted tokens * layers),
// with f_e taken from the top-k before any capacity drop (as HF). The router z-loss (ST-MoE): the
// mean over the layers' counted tokens of logsumexp(logits)^2.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace mt {

struct MoeRoutingConfig {
  int64_t experts = 0;
  int64_t top_k = 1;
  bool renormalize = false;
  // > 0: each expert takes at most ceil(capacity_factor * N * k / E) rows, first come (token order,
  // then choice order) first served; the others are dropped (their slot -1). 0: dropless.
  double capacity_factor = 0.0;
};

// One layer's routing of N tokens.
struct MoeRouting {
  int64_t N = 0, E = 0, k = 0;
  std::vector<float> probs;        // [N, E] softmax of the logits
  std::vector<double> lse;         // [N] logsumexp of the logits (the z-loss)
  std::vector<int32_t> expert;     // [N, k] chosen experts
  std::vector<float> weights;      // [N, k] the combine weights
  std::vector<int32_t> slots;      // [N, k] the expert-ordered row of each choice, -1: dropped
  std::vector<int32_t> token_of_row;  // [M] the token each expert-ordered row holds
  std::vector<int64_t> offsets;    // [E + 1] expert e's rows are [offsets[e], offsets[e + 1])
  int64_t dropped = 0;             // choices a capacity limit dropped
  // The rows sent to and received from each expert shard under expert parallelism, and where
  // this rank's L experts' rows lie among those it computes ([S L + 1]: shard q's rows for local
  // expert j are [local_offsets[q L + j], local_offsets[q L + j + 1]), the order they arrive in;
  // without expert parallelism S = 1 and they are `offsets`). model/moe.cpp.
  std::vector<int64_t> send_rows, recv_rows, local_offsets;
  int64_t rows() const { return offsets.empty() ? 0 : offsets.back(); }
  int64_t received() const { return local_offsets.empty() ? rows() : local_offsets.back(); }
};

// Routes N tokens from their router logits (f32 [N, E], row-major).
MoeRouting route_tokens(const float* logits, int64_t N, const MoeRoutingConfig& cfg);

// The load-balancing and z-loss statistics of one forward, summed over its MoE layers: what the
// losses need, and all a data-parallel layout has to add over its ranks to compute one rank's.
struct MoeBalanceStats {
  std::vector<double> choices;  // [E] times expert e was among a counted token's k
  std::vector<double> prob_sum; // [E] sum of p_e over counted tokens
  double tokens = 0.0;          // counted tokens, summed over the layers
  double z_sum = 0.0;           // sum of logsumexp^2 over counted tokens and layers
  void resize(int64_t E) { choices.assign(size_t(E), 0.0), prob_sum.assign(size_t(E), 0.0); }
};
// The statistics as one array, [choices (E), prob_sum (E), tokens, z_sum, extra], and back: what a
// layout sums over the ranks of a batch's tokens, or a pipeline passes from stage to stage.
// `extra` rides along (the batch's counted tokens, which scale the losses' gradients); an empty
// `stats` packs as zeros.
std::vector<double> pack_balance_stats(const MoeBalanceStats& stats, int64_t E, double extra);
inline int64_t packed_balance_size(int64_t E) { return 2 * E + 3; }  // the packed array's doubles
// Returns `extra`; refuses an array of another expert count.
double unpack_balance_stats(MoeBalanceStats& stats, const std::vector<double>& packed, int64_t E);
// Adds one layer's routing; `counted` [N] (null: every token) says which tokens the losses see
// (HF's attention mask: padding is not counted).
void add_balance_stats(MoeBalanceStats& stats, const MoeRouting& r, const uint8_t* counted);
// aux and z as defined above (0 without counted tokens).
double load_balancing_loss(const MoeBalanceStats& s);
double router_z_loss(const MoeBalanceStats& s);

// The router logits' gradient, f32 [N, E], for one layer: from dweights [N, k] (the combine's
// weight gradients; dropped choices' are 0), plus aux_coef times the load-balancing loss's and
// z_coef times the z-loss's gradients, with the statistics of the whole forward (`stats`), the
// losses' terms scaled by `loss_scale` as the model's loss is.
void route_backward(float* dlogits, const MoeRouting& r, const float* dweights,
                    const MoeRoutingConfig& cfg, const MoeBalanceStats& stats, const uint8_t* counted,
                    double aux_coef, double z_coef, double loss_scale);

}  // namespace mt
