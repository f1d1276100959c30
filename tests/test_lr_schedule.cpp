// optim.schedule: the lr of each step for cosine, linear, constant and warmup-stable-decay.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "train/lr_schedule.h"

namespace mt {
namespace {

OptimConfig schedule(const std::string& name) {
  OptimConfig oc;
  oc.lr = 1.0f, oc.min_lr = 0.1f, oc.warmup_steps = 4, oc.schedule = name;
  return oc;
}

TEST(LrSchedule, WarmupIsTheSameForEverySchedule) {
  for (const char* name : {"cosine", "linear", "constant", "wsd"}) {
    const OptimConfig oc = schedule(name);
    EXPECT_FLOAT_EQ(lr_at(0, 104, oc), 0.25f) << name;
    EXPECT_FLOAT_EQ(lr_at(2, 104, oc), 0.75f) << name;
    EXPECT_FLOAT_EQ(lr_at(3, 104, oc), 1.0f) << name;
    EXPECT_FLOAT_EQ(lr_at(4, 104, oc), 1.0f) << name;  // every decay starts at the peak
  }
}

TEST(LrSchedule, LinearIsAStraightLineToMinLr) {
  const OptimConfig oc = schedule("linear");
  EXPECT_NEAR(lr_at(29, 104, oc), 1.0 - 0.9 * 0.25, 1e-6);  // a quarter of the 100 decay steps
  EXPECT_NEAR(lr_at(54, 104, oc), 0.55, 1e-6);
  EXPECT_NEAR(lr_at(104, 104, oc), 0.1, 1e-6);
  for (int s = 5; s <= 104; ++s)  // equal steps down
    EXPECT_NEAR(lr_at(s - 1, 104, oc) - lr_at(s, 104, oc), 0.009, 1e-6) << s;
}

TEST(LrSchedule, CosineIsHalfACosine) {
  const OptimConfig oc = schedule("cosine");
  EXPECT_NEAR(lr_at(29, 104, oc), 0.1 + 0.45 * (1 + std::cos(M_PI * 0.25)), 1e-6);
  EXPECT_NEAR(lr_at(54, 104, oc), 0.55, 1e-6);
  EXPECT_NEAR(lr_at(104, 104, oc), 0.1, 1e-6);
}

TEST(LrSchedule, ConstantStaysAtLr) {
  const OptimConfig oc = schedule("constant");
  for (int s = 4; s <= 104; ++s) EXPECT_EQ(lr_at(s, 104, oc), 1.0f) << s;
}

// Warmup-stable-decay: lr until the last decay_fraction of the steps after warm-up, then a line
// to min_lr that ends exactly at the run's last step.
TEST(LrSchedule, WarmupStableDecay) {
  OptimConfig oc = schedule("wsd");
  oc.decay_fraction = 0.2f;  // the last 20 of the 100 steps after warm-up
  for (int s = 4; s <= 84; ++s) EXPECT_EQ(lr_at(s, 104, oc), 1.0f) << s;
  EXPECT_NEAR(lr_at(89, 104, oc), 1.0 - 0.9 * 0.25, 1e-6);
  EXPECT_NEAR(lr_at(94, 104, oc), 0.55, 1e-6);
  EXPECT_NEAR(lr_at(104, 104, oc), 0.1, 1e-6);
  oc.decay_fraction = 1.0f;  // all of it: the linear schedule
  const OptimConfig linear = schedule("linear");
  for (int s = 0; s <= 104; ++s) EXPECT_NEAR(lr_at(s, 104, oc), lr_at(s, 104, linear), 1e-6) << s;
  oc.decay_fraction = 0.001f;  // less than a step: one step of decay, to total_steps as every schedule
  EXPECT_EQ(lr_at(103, 104, oc), 1.0f);
  EXPECT_NEAR(lr_at(104, 104, oc), 0.1, 1e-6);
}

}  // namespace
}  // namespace mt
