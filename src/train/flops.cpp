#include "train/flops.h"

#include <chrono>
#include <vector>

#include "backend/device_buffer.h"
#include "model/transformer.h"

namespace mt {

double attended_keys(int64_t window, int64_t T) {
  const double t = double(T);
  if (window <= 0 || window >= T) return t * (t + 1.0) / 2.0;
  const double w = double(window);
  return w * (w + 1.0) / 2.0 + (t - w) * w;  // the first w queries see all before them
}

FlopCount training_flops(const ModelConfig& c, const LoraConfig& lora, int64_t seq_len) {
  // q and o are q_dim wide: hidden_size in LLaMA, heads x an explicit head_dim in Qwen3 or Nemo.
  const int64_t C = c.hidden_size, qd = c.q_dim(), kv = c.kv_dim(), I = c.intermediate_size;
  const int64_t V = c.vocab_size, L = c.num_hidden_layers;
  FlopCount f;
  const int64_t mlp_matrices = c.gelu_mlp() ? 2 : 3;  // GPT-2's MLP has no gate
  // An MoE layer's token passes the router and k experts (counted on active parameters, as
  // Megatron's and the MoE papers' MFU are).
  const int64_t k = c.num_experts_per_tok, Ie = c.moe_intermediate_size;
  int64_t moe_layers = 0;
  for (int64_t l = 0; l < L; ++l) moe_layers += c.moe_layer(l) ? 1 : 0;
  f.matmul_params = L * (2 * qd * C + 2 * kv * C) + (L - moe_layers) * mlp_matrices * I * C +
                    moe_layers * (c.num_experts * C + k * 3 * Ie * C) + V * C;
  // PaLM's square (T x T pairs a layer) is the causal count twice less the diagonal; a window's
  // band the same. Without windows: exactly 12·L·Q·T.
  double pairs = 0.0;
  for (int64_t l = 0; l < L; ++l) pairs += 2.0 * attended_keys(c.attention_window(l), seq_len) - double(seq_len);
  const double attention = 12.0 * double(qd) * pairs / double(seq_len);
  f.attention_per_token = attention;
  const std::string att_formula = c.layer_window.empty()
                                      ? "12*L*Q*T"
                                      : "12*Q*sum_l band_l/T (band_l: pairs |i-j| < window of layer l, T^2 without one)";
  if (!lora.enabled) {
    f.per_token = 6.0 * double(f.matmul_params) + attention;
    f.formula = "6*N + " + att_formula + " (N = matmul weights incl. lm_head, excl. embedding lookup; Q = heads x head_dim)";
    return f;
  }
  auto on = lora_targets_mask(lora);
  const int64_t r = lora.rank;
  for (int p = 0; p < kNumProj; ++p) {
    if (!on[p] || !proj_exists(Proj(p), c)) continue;
    const auto [out, in] = proj_dims(Proj(p), c);
    if (p < kGate) {
      f.lora_params += L * r * (out + in);
      continue;
    }
    f.lora_params += (L - moe_layers) * r * (out + in);  // the MLP's, or a token's k experts'
    const auto [eo, ei] = expert_proj_dims(ExpertProj(p - kGate), c);
    f.lora_params += moe_layers * k * r * (eo + ei);
  }
  if (lora_targets_head(lora)) f.lora_params += r * (V + C);
  f.per_token = 4.0 * double(f.matmul_params) + 6.0 * double(f.lora_params) + attention;
  f.formula = "4*N_base + 6*N_lora + " + att_formula + " (frozen base: no weight-gradient GEMMs)";
  return f;
}

double measure_gemm_flops(int64_t n, double seconds, bool bf16, Backend& backend) {
  const DType t = bf16 ? DType::bf16 : DType::f32;
  DeviceBuffer c(backend, DType::f32, n * n), ab(backend, t, 2 * n * n);
  // Filled in place: a GEMM's speed does not depend on its (normal, finite) values, and a host
  // copy would be two more buffers of the size of A and B.
  backend.fill(ab.tensor(), 0.25f);
  const Tensor C = c.slice(0, n, n), A = ab.slice(0, n, n), B = ab.slice(n * n, n, n);
  backend.matmul(C, A, false, B, false, 1.0f, false);  // create the primitive, warm the caches
  backend.synchronize();
  // Mean over the window, not the best single call: a single short call can read high when the
  // other core happens to be idle and the clock boosts.
  const double flops = 2.0 * double(n) * double(n) * double(n);
  int64_t calls = 0;
  auto t0 = std::chrono::steady_clock::now();
  double spent = 0.0;
  while (spent < seconds || calls < 3) {
    backend.matmul(C, A, false, B, false, 1.0f, false);
    backend.synchronize();
    ++calls;
    spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return flops * double(calls) / spent;
}

}  // namespace mt
