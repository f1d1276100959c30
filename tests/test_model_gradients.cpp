// Whole-model gradients against central finite differences, for full and LoRA training.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "model_fixtures.h"

namespace mt {
namespace {

using testing::randomize;
using testing::tiny_batch;
using testing::tiny_config;

double mean_loss(Transformer& m, const ModelInput& in) {
  LossSum s = m.forward_loss(in);
  return s.sum / double(s.count);
}

// Checks a few coordinates of every tensor in `store` against central differences of the mean
// loss. The gradient must already be in the store's grad buffer.
void check_store(Transformer& m, ParamStore& store, const ModelInput& in) {
  const float eps = 1e-2f;
  for (auto& p : store.params()) {
    ASSERT_NE(p.grad, nullptr) << p.name;
    for (int64_t idx : {int64_t(0), p.numel / 2, p.numel - 1}) {
      float saved = p.master[idx];
      p.master[idx] = saved + eps;
      double up = mean_loss(m, in);
      p.master[idx] = saved - eps;
      double down = mean_loss(m, in);
      p.master[idx] = saved;
      double fd = (up - down) / (2.0 * eps);
      double an = p.grad[idx];
      EXPECT_NEAR(an, fd, 2e-3 + 2e-2 * std::abs(fd)) << p.name << "[" << idx << "]";
    }
  }
}

class ModelGradients : public ::testing::TestWithParam<bool> {};  // param: tied embeddings

TEST_P(ModelGradients, FullTrainingMatchesFiniteDifferences) {
  Transformer m(tiny_config(GetParam()), Precision::fp32, LoraConfig{});
  m.init_weights(1);
  randomize(m.base(), 2, 0.3f);
  auto batch = tiny_batch(32);
  ModelInput in = batch.input();
  m.base().zero_grad();
  LossSum s = m.forward_backward(in, 1.0f / float(batch.B * batch.T - 1));
  ASSERT_EQ(s.count, batch.B * batch.T - 1);
  check_store(m, m.base(), in);
}

TEST_P(ModelGradients, LoraTrainingMatchesFiniteDifferences) {
  LoraConfig lora;
  lora.enabled = true;
  lora.rank = 2;
  lora.alpha = 4.0f;
  lora.targets = {"q", "k", "v", "o", "gate", "up", "down", "lm_head"};
  Transformer m(tiny_config(GetParam()), Precision::fp32, lora);
  m.init_weights(1);
  randomize(m.base(), 2, 0.3f);
  randomize(m.adapters(), 3, 0.3f);  // B != 0 so every adapter path carries gradient
  auto batch = tiny_batch(32);
  ModelInput in = batch.input();
  m.adapters().zero_grad();
  m.forward_backward(in, 1.0f / float(batch.B * batch.T - 1));
  check_store(m, m.adapters(), in);
  for (auto& p : m.base().params()) EXPECT_EQ(p.grad, nullptr) << p.name << " must be frozen";
}

INSTANTIATE_TEST_SUITE_P(Model, ModelGradients, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Tied" : "Untied"; });

TEST(ModelCheckpointing, SameGradientsAsWithout) {
  for (bool lora_on : {false, true}) {
    LoraConfig lora;
    lora.enabled = lora_on;
    lora.rank = 2;
    auto run = [&](bool ckpt) {
      Transformer m(tiny_config(), Precision::fp32, lora);
      m.init_weights(1);
      randomize(m.adapters(), 3, 0.3f);
      m.set_activation_checkpointing(ckpt);
      auto batch = tiny_batch(32);
      m.trainable().zero_grad();
      m.forward_backward(batch.input(), 0.1f);
      const float* g = m.trainable().grad_data();
      return std::vector<float>(g, g + m.trainable().trainable_numel());
    };
    auto a = run(false), b = run(true);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "lora=" << lora_on << " i=" << i;
  }
}

}  // namespace
}  // namespace mt

namespace mt {
namespace {

TEST(ModelFusedQkv, SameLossAndGradientsAsSeparateProjections) {
  for (bool lora_on : {false, true}) {
    LoraConfig lora;
    lora.enabled = lora_on;
    lora.rank = 2;
    auto run = [&](bool fused) {
      Transformer m(testing::tiny_config(), Precision::fp32, lora);
      m.set_fuse_qkv(fused);
      m.init_weights(1);
      testing::randomize(m.base(), 2, 0.3f);
      testing::randomize(m.adapters(), 3, 0.3f);
      auto batch = testing::tiny_batch(32);
      m.trainable().zero_grad();
      double loss = m.forward_backward(batch.input(), 0.1f).sum;
      const float* g = m.trainable().grad_data();
      std::vector<float> grads(g, g + m.trainable().trainable_numel());
      return std::make_pair(loss, grads);
    };
    auto [la, ga] = run(true);
    auto [lb, gb] = run(false);
    EXPECT_NEAR(la, lb, 1e-5 * std::abs(la));
    // The fused GEMM sums each element in another order than the three: an element that is a
    // small difference of larger terms differs by more than its own size allows (5e-4 of it
    // measured on an AVX2-only CPU), so the bound also scales with the largest element.
    float largest = 0.0f;
    for (float g : gb) largest = std::max(largest, std::abs(g));
    for (size_t i = 0; i < ga.size(); ++i)
      ASSERT_NEAR(ga[i], gb[i], 1e-5 + 1e-4 * std::abs(gb[i]) + 1e-4 * largest) << "lora=" << lora_on << " " << i;
  }
}

}  // namespace
}  // namespace mt
