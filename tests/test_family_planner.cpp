// The planner's FLOPs and time for the families' parts, against counts by hand on a small config:
// sliding windows score min(window, position) keys per query (one count, train/flops.h
// attended_keys, for the model FLOPs and the planner's attention time), q of heads x head_dim,
// and the bias adds and Qwen3's q/k norms as the memory traffic they are.
#include <gtest/gtest.h>

#include <algorithm>

#include "plan/memory_model.h"
#include "plan/time_model.h"
#include "train/flops.h"

namespace mt::plan {
namespace {

// Hidden 64, 4 heads of 24 (q 96 wide), 2 KV heads (kv 48), MLP 128, 3 layers, vocabulary 100;
// windows 0 (full), 8 and 4.
ModelConfig small_family() {
  ModelConfig c;
  c.hidden_size = 64, c.intermediate_size = 128, c.num_hidden_layers = 3;
  c.num_attention_heads = 4, c.num_key_value_heads = 2, c.head_dim_override = 24;
  c.vocab_size = 100, c.max_position_embeddings = 64, c.tie_word_embeddings = false;
  c.layer_window = {0, 8, 4};
  c.validate();
  return c;
}

// Query-key pairs (i, j) with j <= i (causal) and i - j < w, counted one by one.
double causal_pairs_by_loop(int64_t w, int64_t T) {
  double n = 0.0;
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j <= i; ++j)
      if (w <= 0 || i - j < w) n += 1.0;
  return n;
}

TEST(FamilyFlops, AttendedKeysAreMinOfWindowAndPosition) {
  for (int64_t T : {1, 5, 16, 100})
    for (int64_t w : {0, 1, 3, 16, 200}) EXPECT_EQ(attended_keys(w, T), causal_pairs_by_loop(w, T)) << w << " " << T;
  EXPECT_EQ(attended_keys(0, 16), 136.0);  // 16 x 17 / 2
  EXPECT_EQ(attended_keys(8, 16), 100.0);  // 1 + 2 + ... + 8, then 8 more x 8
  EXPECT_EQ(attended_keys(4, 16), 58.0);   // 1 + 2 + 3 + 4, then 12 x 4
}

// Matmul weights per layer: q 96x64, k and v 48x64, o 64x96, gate/up/down 128x64: 43008; x 3
// layers + the head 100 x 64 = 135424. Attention, PaLM's way (no mask): a full layer its T x T
// square (256 pairs at T = 16), a window w the band |i - j| < w (w = 8: 16 + 2 x (15 + ... + 9) =
// 184; w = 4: 16 + 2 x (15 + 14 + 13) = 100): 540 pairs, 12 x 96 x 540 / 16 = 38880 per token.
TEST(FamilyFlops, WindowsAndHeadDimByHand) {
  const ModelConfig c = small_family();
  const FlopCount f = training_flops(c, LoraConfig{}, 16);
  EXPECT_EQ(f.matmul_params, 135424);
  EXPECT_DOUBLE_EQ(f.attention_per_token, 38880.0);
  EXPECT_DOUBLE_EQ(f.per_token, 6.0 * 135424 + 38880.0);
  // Without windows, PaLM's 12·L·Q·T exactly: 12 x 3 x 96 x 16.
  ModelConfig full = c;
  full.layer_window.clear();
  EXPECT_DOUBLE_EQ(training_flops(full, LoraConfig{}, 16).attention_per_token, 55296.0);
  // LoRA prices the same attention.
  LoraConfig lora;
  lora.enabled = true, lora.rank = 4, lora.targets = {"q", "v"};
  const FlopCount fl = training_flops(c, lora, 16);
  EXPECT_EQ(fl.lora_params, 3 * 4 * ((96 + 64) + (48 + 64)));
  EXPECT_DOUBLE_EQ(fl.per_token, 4.0 * 135424 + 6.0 * double(fl.lora_params) + 38880.0);
}

PlanInput small_input(const ModelConfig& c) {
  PlanInput in;
  in.model = {"small", c};
  in.cluster = cluster_preset("cpu");
  in.seq = 16, in.micro_batch = 2, in.global_batch = 4;  // 2 micro-batches of 32 tokens
  in.mesh = parallel::MeshShape::parse("dp=1");
  return in;
}

// The planner's attention: 4·Q flops per pair scored in the forward, 2.5 times that in the
// backward, at the cluster's attention efficiency; the windows leave (136 - 100) + (136 - 58) =
// 114 of the full layers' 3 x 136 pairs per sequence unscored.
TEST(FamilyTime, WindowsPriceAttentionAtTheKeysEachQuerySees) {
  const ModelConfig windowed = small_family();
  ModelConfig full = windowed;
  full.layer_window.clear();
  const PlanInput a = small_input(full), b = small_input(windowed);
  const TimeBreakdown ta = step_time(a), tb = step_time(b);
  const double sequences = 4.0;  // of the step, 2 per micro-batch
  const double pair_seconds =
      4.0 * 96.0 * (1.0 + kAttentionBackwardRatio) / (a.cluster.peak_flops * a.cluster.attention_efficiency);
  EXPECT_NEAR(ta.compute - tb.compute, sequences * 114.0 * pair_seconds, 1e-9 * ta.compute);
  // The model FLOPs behind MFU drop by the same rule (PaLM's bands): 256 x 3 - 540 pairs per
  // sequence, 12 x 96 flops each, over 16 tokens.
  EXPECT_NEAR(ta.model_flops - tb.model_flops, 4.0 * 16.0 * 12.0 * 96.0 * (768.0 - 540.0) / 16.0, 1e-6);
}

// Qwen2's q/k/v biases: each bias add reads and writes its output in the forward (2 x 4 bytes in
// fp32 per element of q 96 + k 48 + v 48 = 192 per token) and reads its gradient again in the
// backward (4 bytes): 12 x 192 bytes per token per layer at the cluster's memory bandwidth.
// Qwen3's q/k norms: the layer saves q and k before their norm and the norms' rstd in f32 (96 +
// 48 + 4 + 2 per token), which the elementwise traffic (kElementwiseTraffic bytes moved per byte
// saved) prices.
TEST(FamilyTime, BiasesAndQkNormsAreElementwiseTraffic) {
  ModelConfig plain = small_family();
  plain.layer_window.clear();
  ModelConfig biased = plain, normed = plain;
  biased.qkv_bias = true;
  normed.qk_norm = true;
  PlanInput in = small_input(plain);
  in.precision = Precision::fp32;
  const double base = step_time(in).compute;
  const double bandwidth = in.cluster.memory_bandwidth, tokens = 64.0, layers = 3.0;
  in.model.config = biased;
  EXPECT_NEAR(step_time(in).compute - base, tokens * layers * 12.0 * 192.0 / bandwidth, 1e-9 * base);
  in.model.config = normed;
  EXPECT_NEAR(step_time(in).compute - base, tokens * layers * kElementwiseTraffic * 4.0 * (96 + 48 + 4 + 2) / bandwidth,
              1e-9 * base);
  // A frozen base under LoRA has no bias gradient to read: 8 bytes per element only.
  in.model.config = plain;
  in.lora.enabled = true, in.lora.rank = 4, in.lora.targets = {"q"};
  const double lora_base = step_time(in).compute;
  in.model.config = biased;
  EXPECT_NEAR(step_time(in).compute - lora_base, tokens * layers * 8.0 * 192.0 / bandwidth, 1e-9 * lora_base);
}

// The activations a Qwen3-like layer saves, by hand (fp32, one rank): n1, n2 64 each; q and the
// attention output 96 each (heads x head_dim, not hidden); k, v 48 each; gate, up, h 128 each; f32
// rstd1, rstd2, lse (4 heads), x2 64; q/k norms: q and k before the norm 96 + 48, their rstd 4 + 2.
TEST(FamilyMemory, AQwen3LayerSavesItsHeadsTimesHeadDimAndItsNormInputs) {
  ModelConfig c = small_family();
  c.layer_window.clear();
  c.qk_norm = true;
  PlanInput in = small_input(c);
  in.precision = Precision::fp32;
  const double per_token = 4.0 * (64 + 64 + 96 + 96 + 48 + 48 + 3 * 128) + 4.0 * (2 + 4 + 64) + 4.0 * (96 + 48 + 4 + 2);
  EXPECT_DOUBLE_EQ(activation_bytes(in, 1, false, false).layer, 32.0 * per_token);
  // On tp = 2 the heads, KV heads and the MLP split; without sequence parallelism n1, n2, rstd1,
  // rstd2 and x2 stay whole, with it they split too.
  in.mesh = parallel::MeshShape::parse("tp=2");
  in.sequence_parallel = false;
  const double split = 4.0 * (64 + 64) + 4.0 * (96 + 96 + 48 + 48 + 3 * 128) / 2 + 4.0 * (2 + 64) +
                       4.0 * (4 + 96 + 48 + 4 + 2) / 2;
  EXPECT_DOUBLE_EQ(activation_bytes(in, 1, false, false).layer, 32.0 * split);
  in.sequence_parallel = true;
  const double sequence_split = 4.0 * (64 + 64) / 2 + 4.0 * (96 + 96 + 48 + 48 + 3 * 128) / 2 +
                                4.0 * (2 + 64) / 2 + 4.0 * (4 + 96 + 48 + 4 + 2) / 2;
  EXPECT_DOUBLE_EQ(activation_bytes(in, 1, false, false).layer, 32.0 * sequence_split);
}

}  // namespace
}  // namespace mt::plan
