// bf16 mixed precision against the fp32 reference on the same weights.
#include <gtest/gtest.h>

#include <cmath>

#include "model_fixtures.h"

namespace mt {
namespace {

TEST(ModelPrecision, Bf16LossAgreesWithFp32) {
  ModelConfig c;
  c.hidden_size = 64;
  c.intermediate_size = 172;
  c.num_hidden_layers = 3;
  c.num_attention_heads = 8;
  c.num_key_value_heads = 4;
  c.vocab_size = 128;
  c.max_position_embeddings = 64;
  Transformer f32(c, Precision::fp32, LoraConfig{});
  Transformer b16(c, Precision::bf16, LoraConfig{});
  f32.init_weights(11);
  b16.init_weights(11);
  testing::randomize(f32.base(), 12, 0.1f);
  testing::randomize(b16.base(), 12, 0.1f);
  auto batch = testing::tiny_batch(c.vocab_size, 3, 4, 48);
  LossSum a = f32.forward_backward(batch.input(), 1.0f);
  LossSum b = b16.forward_backward(batch.input(), 1.0f);
  double la = a.sum / a.count, lb = b.sum / b.count;
  // Stated tolerance: bf16 keeps 8 mantissa bits; over 3 blocks the mean loss moves by well under 1%.
  EXPECT_NEAR(la, lb, 0.01 * la) << "fp32 " << la << " bf16 " << lb;
  // Gradients point the same way: cosine similarity of the whole gradient vector.
  const float* ga = f32.base().grad_data();
  const float* gb = b16.base().grad_data();
  double dot = 0, na = 0, nb = 0;
  for (int64_t i = 0; i < f32.base().trainable_numel(); ++i) {
    dot += double(ga[i]) * gb[i], na += double(ga[i]) * ga[i], nb += double(gb[i]) * gb[i];
  }
  EXPECT_GT(dot / std::sqrt(na * nb), 0.99);
}

}  // namespace
}  // namespace mt
