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
  int64_t matmul_params = 0;  // base weights used in matmuls: 7 projections per layer + lm_head
  int64_t lora_params = 0;
  double per_token = 0.0;     // training FLOPs per token
  std::string formula;        // how per_token was counted, for the logs and docs/benchmarks.md
};

// Full training: 6 * matmul_params + 12 * L * C * T (attention scores and values, forward 4·C·T
// per layer per token counting the full T x T square as PaLM does, backward twice that).
// LoRA: the frozen base needs no weight gradients: 4 * matmul_params + 6 * lora_params + 12·L·C·T.
FlopCount training_flops(const LlamaConfig& c, const LoraConfig& lora, int64_t seq_len);

// Sustained GEMM throughput (FLOP/s) of a backend on square matrices of the given size, over
// `seconds`.
double measure_gemm_flops(int64_t size, double seconds, bool bf16 = true,
                          Backend& backend = cpu_backend());

}  // namespace mt
