// The planner's price of a preference-training step (train/preference_step.h): the forwards each
// micro-batch runs before its training pass (one for the policy's log-probabilities, a second for
// an adapters-off reference) add their compute and the forward's share of every axis's traffic.
#include <gtest/gtest.h>

#include "plan/run_memory.h"
#include "plan/time_model.h"

namespace mt::plan {
namespace {

TEST(PlanPreference, ForwardsPerStepFollowTheMethodAndTheReference) {
  EXPECT_EQ(preference_forwards("sft", true, "auto"), 0);
  EXPECT_EQ(preference_forwards("dpo", true, "auto"), 2);          // the policy, the adapters-off reference
  EXPECT_EQ(preference_forwards("dpo", false, "auto"), 1);         // full: the reference precomputed
  EXPECT_EQ(preference_forwards("ipo", true, "precomputed"), 1);
  EXPECT_EQ(preference_forwards("simpo", true, "auto"), 1);        // no reference
  EXPECT_EQ(preference_forwards("orpo", true, "adapters_off"), 1);
}

TEST(PlanPreference, EachForwardAddsTheSameComputeAndTraffic) {
  PlanInput in;
  in.model = model_preset("llama3-8b");
  in.cluster = cluster_preset("mi300x-node");
  in.mesh = parallel::MeshShape::parse("fsdp=4,tp=2");
  in.seq = 2048, in.micro_batch = 1, in.global_batch = 8;
  const TimeBreakdown sft = step_time(in);
  in.extra_forwards = 1;
  const TimeBreakdown one = step_time(in);
  in.extra_forwards = 2;
  const TimeBreakdown two = step_time(in);
  EXPECT_NEAR(two.compute - sft.compute, 2.0 * (one.compute - sft.compute), 1e-9 * two.compute);
  // Full training, no recompute: a forward is about a third of a forward and its backward.
  EXPECT_NEAR((one.compute - sft.compute) / sft.compute, 1.0 / 3.0, 0.05);
  EXPECT_GT(one.tp, sft.tp);
  EXPECT_GT(one.fsdp, sft.fsdp);
  EXPECT_GT(one.step, sft.step);
  // The model's FLOPs (the MFU numerator) stay the training pass's: the extra forwards are overhead.
  EXPECT_EQ(one.model_flops, sft.model_flops);
}

}  // namespace
}  // namespace mt::plan
