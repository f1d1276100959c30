// Preference training's pieces: each loss's gradient in the sequences' log-probabilities against
// central differences; the model's per-token losses, weighted gradients and adapters-off forward;
// and a whole preference gradient through a tiny model against finite differences of its loss.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "model_fixtures.h"
#include "train/preference_loss.h"
#include "train/preference_step.h"

namespace mt {
namespace {

using testing::randomize;
using testing::tiny_batch;
using testing::tiny_config;

std::vector<PreferenceLossConfig> every_loss() {
  return {{PreferenceLoss::kSigmoid, 0.1, 0.0, 0.5, 0.0}, {PreferenceLoss::kSigmoid, 0.5, 0.2, 0.5, 0.0},
          {PreferenceLoss::kIpo, 0.1, 0.0, 0.5, 0.0},     {PreferenceLoss::kSimpo, 2.0, 0.1, 0.8, 0.0},
          {PreferenceLoss::kSimpo, 2.0, 0.0, 0.5, 0.7},   {PreferenceLoss::kOrpo, 0.1, 0.0, 0.5, 0.0}};
}

std::string describe(const PreferenceLossConfig& c) {
  return std::string(preference_loss_name(c.loss)) + " beta " + std::to_string(c.beta) + " ls " +
         std::to_string(c.label_smoothing) + " alpha " + std::to_string(c.cpo_alpha);
}

std::vector<CompletionLogp> random_logps(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> per_token(-3.0, -0.05);
  std::vector<CompletionLogp> out(n);
  for (auto& s : out) {
    s.tokens = 2 + int64_t(rng() % 9);
    s.sum = per_token(rng) * double(s.tokens);
  }
  return out;
}

TEST(PreferenceLoss, GradientInEachSequenceMatchesCentralDifferences) {
  const std::vector<CompletionLogp> policy = random_logps(8, 1), reference = random_logps(8, 2);
  for (const PreferenceLossConfig& c : every_loss()) {
    const auto ref = needs_reference(c.loss) ? std::span<const CompletionLogp>(reference) : std::span<const CompletionLogp>();
    const PreferenceResult r = preference_loss(c, policy, ref);
    ASSERT_TRUE(std::isfinite(r.loss)) << describe(c);
    for (size_t i = 0; i < policy.size(); ++i) {
      std::vector<CompletionLogp> up = policy, down = policy;
      const double h = 1e-5;
      up[i].sum += h, down[i].sum -= h;
      const double fd = (preference_loss(c, up, ref).loss - preference_loss(c, down, ref).loss) / (2 * h);
      EXPECT_NEAR(r.dsum[i], fd, 1e-8 + 1e-6 * std::fabs(fd)) << describe(c) << " sequence " << i;
    }
  }
}

TEST(PreferenceLoss, PolicyEqualToItsReferenceGivesTheLossesAtZero) {
  const std::vector<CompletionLogp> same = random_logps(6, 3);
  PreferenceLossConfig dpo{PreferenceLoss::kSigmoid, 0.1};
  const PreferenceResult d = preference_loss(dpo, same, same);
  EXPECT_NEAR(d.loss, std::log(2.0), 1e-15);
  EXPECT_EQ(d.metrics.rewards_chosen, 0.0);
  EXPECT_EQ(d.metrics.accuracy, 0.0);  // a tie is not a win, as TRL's chosen > rejected
  EXPECT_EQ(d.metrics.pairs, 3);
  PreferenceLossConfig ipo{PreferenceLoss::kIpo, 0.25};
  EXPECT_NEAR(preference_loss(ipo, same, same).loss, 4.0, 1e-12);  // (0 - 1 / (2 x 0.25))^2
  EXPECT_THROW(preference_loss(dpo, same, {}), Error);  // dpo needs its reference
  EXPECT_EQ(parse_preference_loss("dpo"), PreferenceLoss::kSigmoid);
  EXPECT_THROW(parse_preference_loss("kto"), Error);
}

// A tiny model and a batch of two pairs (rows 0/1 and 2/3) whose first half is prompt.
struct PairBatch {
  testing::TinyBatch b;
  PairBatch() : b(tiny_batch(32, 11, 4, 6)) {
    for (int64_t r = 0; r < b.B; ++r)
      for (int64_t t = 0; t < 3; ++t) b.targets[size_t(r * b.T + t)] = -1;
  }
  ModelInput input() const { return b.input(); }
};

LoraConfig tiny_lora() {
  LoraConfig lora;
  lora.enabled = true, lora.rank = 2, lora.alpha = 4.0f;
  lora.targets = {"q", "v", "o", "down", "lm_head"};
  return lora;
}

TEST(PreferenceModel, TokenLossesAreTheLossOfEachCountedToken) {
  Transformer m(tiny_config(), Precision::fp32, LoraConfig{});
  m.init_weights(1);
  PairBatch pb;
  std::vector<float> losses(size_t(pb.b.B * pb.b.T), -1.0f);
  ModelInput in = pb.input();
  in.token_losses = losses.data();
  const LossSum s = m.forward_loss(in);
  double sum = 0.0;
  for (size_t i = 0; i < losses.size(); ++i) {
    if (pb.b.targets[i] < 0) EXPECT_EQ(losses[i], 0.0f) << i;
    else EXPECT_GT(losses[i], 0.0f) << i;
    sum += losses[i];
  }
  EXPECT_NEAR(sum, s.sum, 1e-5 * s.sum);
}

TEST(PreferenceModel, AdaptersOffIsTheBaseAloneAndTheNextPassHasThemAgain) {
  Transformer lora(tiny_config(), Precision::fp32, tiny_lora()), base(tiny_config(), Precision::fp32, LoraConfig{});
  lora.init_weights(1), base.init_weights(1);
  randomize(lora.adapters(), 3, 0.3f);  // B != 0: the adapters change every output
  PairBatch pb;
  ModelInput in = pb.input();
  const double with = lora.forward_loss(in).sum, alone = base.forward_loss(in).sum;
  ASSERT_GT(std::fabs(with - alone), 1e-3);
  in.adapters_off = true;
  EXPECT_NEAR(lora.forward_loss(in).sum, alone, 1e-6 * alone);
  in.adapters_off = false;
  EXPECT_NEAR(lora.forward_loss(in).sum, with, 1e-6 * with);
  in.adapters_off = true;
  EXPECT_THROW(lora.forward_backward(in, 1.0f), Error);  // never in a training pass
}

TEST(PreferenceModel, TokenWeightsScaleEachRowsGradient) {
  // sum_r w_r grad(loss of row r) from one weighted pass equals the separate passes' sum.
  Transformer m(tiny_config(), Precision::fp32, tiny_lora());
  m.init_weights(1);
  randomize(m.adapters(), 3, 0.3f);
  PairBatch pb;
  const float w[4] = {0.5f, -2.0f, 1.5f, 0.25f};
  std::vector<float> weights(size_t(pb.b.B * pb.b.T));
  for (int64_t r = 0; r < pb.b.B; ++r)
    for (int64_t t = 0; t < pb.b.T; ++t) weights[size_t(r * pb.b.T + t)] = w[r];
  ModelInput in = pb.input();
  in.token_weights = weights.data();
  m.adapters().zero_grad();
  m.forward_backward(in, 0.5f);
  std::vector<float> weighted(m.adapters().grad_data(), m.adapters().grad_data() + m.adapters().trainable_numel());
  m.adapters().zero_grad();
  for (int64_t r = 0; r < pb.b.B; ++r) {  // row r alone: the others' targets ignored
    testing::TinyBatch one = pb.b;
    for (size_t i = 0; i < one.targets.size(); ++i)
      if (int64_t(i) / one.T != r) one.targets[i] = -1;
    m.forward_backward(one.input(), 0.5f * w[r]);
  }
  const float* separate = m.adapters().grad_data();
  for (size_t i = 0; i < weighted.size(); ++i)
    EXPECT_NEAR(weighted[i], separate[i], 1e-5f + 1e-4f * std::fabs(separate[i])) << i;
}

// The loss of `in`'s pairs under `cfg` with the adapters-off reference.
double pair_loss(Transformer& m, const ModelInput& in, const PreferenceLossConfig& cfg) {
  const ForwardPass forward = [&](const ModelInput& x) { return m.forward_loss(x); };
  const std::vector<CompletionLogp> policy = completion_logps({in}, in.B, false, true, nullptr, forward);
  const std::vector<CompletionLogp> ref = completion_logps({in}, in.B, true, true, nullptr, forward);
  return preference_loss(cfg, policy, needs_reference(cfg.loss) ? std::span<const CompletionLogp>(ref)
                                                                : std::span<const CompletionLogp>())
      .loss;
}

TEST(PreferenceModel, EachLossesGradientThroughTheModelMatchesFiniteDifferences) {
  PairBatch pb;
  for (PreferenceLossConfig cfg : every_loss()) {
    cfg.beta = cfg.loss == PreferenceLoss::kOrpo || cfg.loss == PreferenceLoss::kSimpo ? cfg.beta : 1.0;
    Transformer m(tiny_config(), Precision::fp32, tiny_lora());
    m.init_weights(1);
    randomize(m.base(), 2, 0.3f);
    randomize(m.adapters(), 3, 0.3f);
    // What preference_step does before its training pass: the weights, from the pairs' loss.
    ModelInput in = pb.input();
    const ForwardPass forward = [&](const ModelInput& x) { return m.forward_loss(x); };
    const std::vector<CompletionLogp> policy = completion_logps({in}, in.B, false, true, nullptr, forward);
    const std::vector<CompletionLogp> ref = completion_logps({in}, in.B, true, true, nullptr, forward);
    const PreferenceResult r = preference_loss(
        cfg, policy, needs_reference(cfg.loss) ? std::span<const CompletionLogp>(ref) : std::span<const CompletionLogp>());
    std::vector<float> weights(size_t(in.B * in.T));
    for (int64_t row = 0; row < in.B; ++row)
      for (int64_t t = 0; t < in.T; ++t) weights[size_t(row * in.T + t)] = float(-r.dsum[size_t(row)]);
    in.token_weights = weights.data();
    m.adapters().zero_grad();
    m.forward_backward(in, 1.0f);
    in.token_weights = nullptr;
    // Smaller than test_model_gradients.cpp's 1e-2: a pair's loss curves more than a mean token
    // loss (central differences err by eps^2 x the third derivative), and f32 noise over 2 eps is
    // still far below the tolerance.
    const float eps = 2e-3f;
    for (auto& p : m.adapters().params())
      for (int64_t idx : {int64_t(0), p.numel / 2, p.numel - 1}) {
        const float saved = p.master[idx];
        p.master[idx] = saved + eps;
        const double up = pair_loss(m, in, cfg);
        p.master[idx] = saved - eps;
        const double down = pair_loss(m, in, cfg);
        p.master[idx] = saved;
        const double fd = (up - down) / (2.0 * eps);
        EXPECT_NEAR(p.grad[idx], fd, 2e-4 + 2e-2 * std::fabs(fd)) << describe(cfg) << " " << p.name << "[" << idx << "]";
      }
  }
}

TEST(PreferenceModel, AStepCutIntoMicroBatchesIsTheWholeBatchsStep) {
  PairBatch pb;
  PreferenceSetup setup;
  setup.loss = {PreferenceLoss::kSigmoid, 0.5};
  setup.reference = ReferenceSource::kAdaptersOff;
  OptimConfig oc;
  oc.grad_clip = 0.0f;
  auto run = [&](int micro_batches) {
    Transformer m(tiny_config(), Precision::fp32, tiny_lora());
    m.init_weights(1);
    randomize(m.adapters(), 3, 0.3f);
    AdamW opt(m.adapters(), oc);
    std::vector<ModelInput> micro;
    const int64_t rows = pb.b.B / micro_batches;
    for (int k = 0; k < micro_batches; ++k) {
      ModelInput in = pb.input();
      in.tokens += k * rows * in.T, in.targets += k * rows * in.T;
      in.B = rows;
      in.noise.first_row = k * rows;
      micro.push_back(in);
    }
    const StepResult r = preference_step(m, opt, micro, pb.b.B, setup, {}, oc, 0, 1e-3f, nullptr, {},
                                         [&](const ModelInput& x) { return m.forward_loss(x); });
    EXPECT_EQ(r.preference.pairs, 2);
    std::vector<float> after(m.adapters().master_data(), m.adapters().master_data() + m.adapters().trainable_numel());
    return std::make_pair(r, after);
  };
  const auto [one, w1] = run(1);
  const auto [two, w2] = run(2);
  EXPECT_NEAR(one.loss, two.loss, 1e-6);
  EXPECT_NEAR(one.grad_norm, two.grad_norm, 1e-5 * one.grad_norm);
  for (size_t i = 0; i < w1.size(); ++i) EXPECT_NEAR(w1[i], w2[i], 1e-6f) << i;
}

}  // namespace
}  // namespace mt
