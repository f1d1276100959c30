// Model FLOPs (the work the model needs, not what the hardware did: activation recomputation is
// not counted) and this machine's measured bf16 GEMM peak, the denominator of MFU.
#pragma once
#include <cstdint>
#include <string>

#include "backend/backend.h"
#include "model/config.h"
#include "train/run_config.h"

namespace mt {

struct FlopCount {
  // Base weights a token's matmuls use: 7 projections per layer + lm_head (an MoE layer: q, k, v,
  // o, the router and k of its experts).
  int64_t matmul_params = 0;
  int64_t lora_params = 0;    // adapters a token's matmuls use (an MoE layer's: its k experts')
  double attention_per_token = 0.0;  // the attention term of per_token
  double per_token = 0.0;     // training FLOPs per token
  std::string formula;        // how per_token was counted, for the logs and docs/benchmarks.md
};

// Keys the T queries of one sequence score in a causal layer, summed over the queries: query i
// (0-based) sees the i + 1 positions up to its own, or under an attention window w > 0 the last
// min(w, i + 1). The one count of attention work: the model FLOPs below and the planner's
// attention time (plan/time_model.cpp) both start from it.
double attended_keys(int64_t window, int64_t seq_len);

// Full training: 6 * matmul_params + 12 * Q * K per token (Q = heads x head_dim; attention
// scores and values, forward 4·Q per query-key pair, backward twice that), K = the keys a token's
// query is counted against, averaged over the layers: as PaLM counts it, the full T x T square
// with no causal mask (K = T, 12·L·Q·T summed over the layers), and under a window w the band
// |i - j| < w, by the same rule (2 x attended_keys(w, T) - T pairs).
// LoRA: the frozen base needs no weight gradients: 4 * matmul_params + 6 * lora_params + the same
// attention term.
FlopCount training_flops(const ModelConfig& c, const LoraConfig& lora, int64_t seq_len);

// Sustained GEMM throughput (FLOP/s) of a backend on square matrices of the given size, over
// `seconds`.
double measure_gemm_flops(int64_t size, double seconds, bool bf16 = true,
                          Backend& backend = cpu_backend());

}  // namespace mt
