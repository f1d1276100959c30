// Time per optimizer step, item by item: compute (each GEMM's FLOPs over peak times an efficiency
// that depends on its smallest dimension; flash attention and elementwise ops separately),
// communication per mesh axis (ring collectives, alpha-beta, each axis on its own link), the
// pipeline bubble, overlap, and the optimizer. Formulas: docs/planner.md, "Time".
#pragma once
#include <cstdint>
#include <string>

#include "plan/plan_input.h"

namespace mt::plan {

// Bytes an elementwise op moves per byte of activation it saves (written in forward, read and
// gradient written in backward, input read): a memory-bandwidth term for norms, RoPE, SwiGLU/GELU,
// residual adds.
inline constexpr double kElementwiseTraffic = 4.0;
// Bytes the AdamW update moves per trainable element: read grad (4), read+write master (8),
// m and v (16), write the bf16 copy (2).
inline constexpr double kOptimizerBytes = 30.0;
// Flash attention's backward does 5 GEMM-like products to the forward's 2.
inline constexpr double kAttentionBackwardRatio = 2.5;

// Fraction of peak a GEMM reaches: gemm_efficiency · d / (d + gemm_half_dim), d = min(M, N, K).
double gemm_efficiency(const Cluster& c, double m, double n, double k);
double gemm_seconds(const Cluster& c, double m, double n, double k);

struct TimeBreakdown {
  int64_t micro_batches = 0;
  // Seconds per step on the slowest stage.
  double compute = 0.0;        // all micro-batches' forward, recompute and backward
  double tp = 0.0;             // tensor-parallel all-reduces (on the critical path)
  double fsdp = 0.0, fsdp_exposed = 0.0;  // gathers + reduce-scatters (incl. ZeRO-3 over dp), and the part compute does not hide
  double pp = 0.0;             // stage-to-stage sends
  double cp = 0.0;             // context parallel K/V all-gathers and dK/dV reduce-scatters (all exposed)
  double ep = 0.0;             // expert parallel all-to-alls of routed rows (all exposed; expert_traffic.h)
  double dp = 0.0, dp_exposed = 0.0;      // gradient reduction once per step (over dp, then ep for non-experts)
  double bubble = 0.0, bubble_fraction = 0.0;  // (p-1)/(m+p-1) of the pipeline's time
  double optimizer = 0.0;
  double step = 0.0;
  // Throughput.
  double tokens_per_s = 0.0;
  double model_flops = 0.0;       // per step: model_flops_per_token x tokens
  double tflops_per_device = 0.0;
  double mfu = 0.0;               // model_flops / step / devices / peak
  double megatron_flops = 0.0;    // per step, Megatron's count (c = 4 with checkpointing)
  double megatron_fraction = 0.0; // of peak, as the Frontier study reports
};

TimeBreakdown step_time(const PlanInput& in, const std::vector<StageParams>& stages);
TimeBreakdown step_time(const PlanInput& in);

}  // namespace mt::plan
