#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "train/adamw.h"
#include "train/lr_schedule.h"

namespace mt {
namespace {

TEST(OptimAdamW, MatchesTheReferenceFormulaOverSeveralSteps) {
  ParamStore store;
  store.add("w", {3}, ParamPlan{true, true, true, /*decay=*/true});
  store.add("norm", {2}, ParamPlan{true, false, true, /*decay=*/false});
  store.allocate();
  OptimConfig oc;
  oc.beta1 = 0.8f, oc.beta2 = 0.9f, oc.eps = 1e-6f, oc.weight_decay = 0.5f;
  AdamW opt(store, oc);
  std::vector<double> w = {0.5, -1.0, 2.0, 1.0, 1.0}, m(5, 0.0), v(5, 0.0);
  for (int i = 0; i < 5; ++i) store.master_data()[i] = float(w[size_t(i)]);
  const double lr = 0.1, clip = 0.5;
  for (int t = 1; t <= 3; ++t) {
    for (int i = 0; i < 5; ++i) store.grad_data()[i] = float(0.3 * (i + 1) * (t % 2 ? 1 : -1));
    opt.step(float(lr), float(clip));
    for (int i = 0; i < 5; ++i) {
      double g = 0.3 * (i + 1) * (t % 2 ? 1 : -1) * clip;
      bool decay = store.params()[0].name == "w" ? i < 3 : i >= 2;
      m[i] = 0.8 * m[i] + 0.2 * g;
      v[i] = 0.9 * v[i] + 0.1 * g * g;
      double mhat = m[i] / (1 - std::pow(0.8, t)), vhat = v[i] / (1 - std::pow(0.9, t));
      w[i] = w[i] * (decay ? 1 - lr * 0.5 : 1.0) - lr * mhat / (std::sqrt(vhat) + 1e-6);
      EXPECT_NEAR(store.master_data()[i], w[i], 1e-5) << "step " << t << " i " << i;
    }
  }
  // The bf16 compute copy follows the master values.
  const Param& p = store.get("w");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(p.compute[i].bits, float_to_bf16(p.master[i]).bits);
}

TEST(OptimSchedule, WarmupThenCosineToMinLr) {
  OptimConfig oc;
  oc.lr = 1.0f, oc.min_lr = 0.1f, oc.warmup_steps = 4;
  EXPECT_FLOAT_EQ(lr_at(0, 104, oc), 0.25f);
  EXPECT_FLOAT_EQ(lr_at(3, 104, oc), 1.0f);
  EXPECT_FLOAT_EQ(lr_at(4, 104, oc), 1.0f);    // cosine starts at the peak
  EXPECT_NEAR(lr_at(54, 104, oc), 0.55f, 1e-6);  // halfway: the mean of lr and min_lr
  EXPECT_NEAR(lr_at(104, 104, oc), 0.1f, 1e-6);
  for (int s = 5; s < 104; ++s) EXPECT_LE(lr_at(s, 104, oc), lr_at(s - 1, 104, oc));
  oc.warmup_steps = 0;
  EXPECT_FLOAT_EQ(lr_at(0, 10, oc), 1.0f);
}

TEST(OptimClip, NormIsExactAndClipFactorBringsItToTheMax) {
  std::vector<float> g(100001);
  double ref = 0.0;
  for (size_t i = 0; i < g.size(); ++i) g[i] = float(std::sin(double(i))), ref += double(g[i]) * g[i];
  double norm = l2_norm(cpu_backend(), Tensor(g.data(), DType::f32, 1, int64_t(g.size()), Device{}));
  EXPECT_NEAR(norm, std::sqrt(ref), 1e-6 * std::sqrt(ref));
  EXPECT_EQ(clip_factor(norm, 0.0f), 1.0f);                // disabled
  EXPECT_EQ(clip_factor(norm, float(norm * 2)), 1.0f);     // below the max
  EXPECT_NEAR(clip_factor(norm, 1.0f) * norm, 1.0, 1e-5);  // above: scaled to the max
}

}  // namespace
}  // namespace mt
