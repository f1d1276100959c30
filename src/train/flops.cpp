#include "train/flops.h"

#include <chrono>

#include "core/buffer.h"
#include "kernels/cpu/gemm.h"
#include "model/llama.h"

namespace mt {

FlopCount training_flops(const LlamaConfig& c, const LoraConfig& lora, int64_t seq_len) {
  const int64_t C = c.hidden_size, kv = c.kv_dim(), I = c.intermediate_size, V = c.vocab_size;
  const int64_t L = c.num_hidden_layers;
  FlopCount f;
  f.matmul_params = L * (2 * C * C + 2 * kv * C + 3 * I * C) + V * C;
  const double attention = 12.0 * double(L) * double(C) * double(seq_len);
  if (!lora.enabled) {
    f.per_token = 6.0 * double(f.matmul_params) + attention;
    f.formula = "6*N + 12*L*C*T (N = matmul weights incl. lm_head, excl. embedding lookup)";
    return f;
  }
  auto on = lora_targets_mask(lora);
  const int64_t r = lora.rank;
  for (int p = 0; p < kNumProj; ++p) {
    if (!on[p]) continue;
    int64_t out = (p == kK || p == kV) ? kv : (p == kGate || p == kUp) ? I : C;
    int64_t in = p == kDown ? I : C;
    f.lora_params += L * r * (out + in);
  }
  if (lora_targets_head(lora)) f.lora_params += r * (V + C);
  f.per_token = 4.0 * double(f.matmul_params) + 6.0 * double(f.lora_params) + attention;
  f.formula = "4*N_base + 6*N_lora + 12*L*C*T (frozen base: no weight-gradient GEMMs)";
  return f;
}

double measure_gemm_flops(int64_t n, double seconds, bool bf16) {
  const size_t elems = size_t(n * n);
  Buffer<float> c(elems);
  GemmArgs g;
  g.M = g.N = g.K = n;
  g.lda = g.ldb = g.ldc = n;
  g.C = c.data();
  Buffer<mt::bf16> ab(bf16 ? 2 * elems : 0);
  Buffer<float> af(bf16 ? 0 : 2 * elems);
  if (bf16) {
    for (size_t i = 0; i < 2 * elems; ++i) ab[i] = float_to_bf16(float(i % 7) * 0.1f);
    g.A = ab.data(), g.B = ab.data() + elems, g.ab_type = DType::bf16;
  } else {
    for (size_t i = 0; i < 2 * elems; ++i) af[i] = float(i % 7) * 0.1f;
    g.A = af.data(), g.B = af.data() + elems;
  }
  gemm(g);  // create the primitive and warm the caches
  // Mean over the window, not the best single call: a single short call can read high when the
  // other core happens to be idle and the clock boosts.
  const double flops = 2.0 * double(n) * double(n) * double(n);
  int64_t calls = 0;
  auto t0 = std::chrono::steady_clock::now();
  double spent = 0.0;
  while (spent < seconds || calls < 3) {
    gemm(g);
    ++calls;
    spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return flops * double(calls) / spent;
}

}  // namespace mt
