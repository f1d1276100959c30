// A model told which units it runs (Transformer::set_units, what a pipeline stage tells it) plans
// its activation arena for those units alone: two models holding the two halves of the units give
// the whole model's loss and gradients bit for bit, each with a smaller arena, whose bytes are the
// planner's figure for that stage (plan/memory_model.cpp prices the same arena); a span outside
// the units it was told is refused.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/device_buffer.h"
#include "core/error.h"
#include "model/transformer.h"
#include "plan/memory_model.h"
#include "train/run_config.h"

namespace mt {
namespace {

struct Batch {
  std::vector<int32_t> tokens, targets;
  ModelInput in;
};

Batch batch(int64_t B, int64_t T) {
  Batch b;
  b.tokens.resize(size_t(B * T)), b.targets.resize(size_t(B * T));
  for (size_t i = 0; i < b.tokens.size(); ++i)
    b.tokens[i] = int32_t((i * 7) % 256), b.targets[i] = int32_t((i * 5 + 3) % 256);
  b.in.tokens = b.tokens.data(), b.in.targets = b.targets.data(), b.in.B = B, b.in.T = T;
  return b;
}

ModelConfig tiny() { return parse_run_config(default_run_config_toml(), {}, "<test>").model; }

// The planner's activation and logits items for a stage running `layers` blocks at once, with the
// head or not: what the model's arena holds (tp = 1).
double planned_arena(const ModelConfig& c, Precision precision, bool checkpointing, int64_t B, int64_t T,
                     int64_t layers, bool head) {
  plan::PlanInput in;
  in.model = {"tiny", c};
  in.precision = precision, in.checkpointing = checkpointing;
  in.seq = T, in.micro_batch = B, in.global_batch = B;
  const plan::ActivationBytes a = plan::activation_bytes(in, layers, /*first_stage=*/true, head);
  return a.per_micro_batch + a.shared + a.logits;
}

// Each base parameter's gradient in `whole` equals, bit for bit, the one of the model holding its
// unit (`front`: units up to `cut`, else `back`). Returns the names compared.
std::vector<std::string> expect_holders_gradients(Transformer& whole, Transformer& front, Transformer& back,
                                                  const ModelConfig& c, int cut) {
  std::vector<std::string> compared;
  for (size_t i = 0; i < whole.base().params().size(); ++i) {
    const Param& p = whole.base().params()[i];
    if (!p.grad) continue;
    Transformer& holder = param_unit(p.name, c) <= cut ? front : back;
    std::vector<float> want(size_t(p.numel)), have(want.size());
    cpu_backend().copy_to_host(want.data(), p.grad_tensor());
    cpu_backend().copy_to_host(have.data(), holder.base().params()[i].grad_tensor());
    EXPECT_EQ(want, have) << p.name;
    compared.push_back(p.name);
  }
  return compared;
}

TEST(StageUnits, HalvesOfTheUnitsEqualTheWholeModelWithSmallerArenasThePlannerPrices) {
  const ModelConfig c = tiny();
  const int L = int(c.num_hidden_layers), cut = 1;  // front: embedding and block 0; back: the rest
  const int64_t B = 2, T = 16, C = c.hidden_size;
  for (const Precision precision : {Precision::fp32, Precision::bf16})
    for (const bool ckpt : {false, true}) {
      SCOPED_TRACE(std::string(precision == Precision::bf16 ? "bf16" : "fp32") + (ckpt ? " checkpointing" : ""));
      Batch b = batch(B, T);
      Transformer whole(c, precision, LoraConfig{});
      whole.init_weights(3);
      whole.set_activation_checkpointing(ckpt);
      const LossSum expected = whole.forward_backward(b.in, 1.0f);

      Transformer front(c, precision, LoraConfig{}), back(c, precision, LoraConfig{});
      for (Transformer* m : {&front, &back}) m->init_weights(3), m->set_activation_checkpointing(ckpt);
      front.set_units({{0, cut}});
      back.set_units({{cut + 1, L + 1}});
      DeviceBuffer x(cpu_backend(), DType::f32, B * T * C), dx(cpu_backend(), DType::f32, B * T * C);
      front.run_units(b.in, UnitSpan{0, cut, {}, x.tensor(), {}, {}}, false, 1.0f);
      const LossSum got = back.run_units(b.in, UnitSpan{cut + 1, L + 1, x.tensor(), {}, {}, dx.tensor()}, true, 1.0f);
      front.run_units(b.in, UnitSpan{0, cut, {}, {}, dx.tensor(), {}}, true, 1.0f);
      EXPECT_EQ(got.sum, expected.sum);
      EXPECT_EQ(got.count, expected.count);
      expect_holders_gradients(whole, front, back, c, cut);
      // The arena: the front holds one block and no head, the back three blocks and the head.
      EXPECT_LT(front.activation_bytes(), back.activation_bytes());
      EXPECT_LT(back.activation_bytes(), whole.activation_bytes());
      EXPECT_EQ(double(whole.activation_bytes()), planned_arena(c, precision, ckpt, B, T, L, true));
      EXPECT_EQ(double(front.activation_bytes()), planned_arena(c, precision, ckpt, B, T, cut, false));
      EXPECT_EQ(double(back.activation_bytes()), planned_arena(c, precision, ckpt, B, T, L - cut, true));
    }
}

// A mixture of experts with its routing losses, cut in two: the statistics the spans pass along
// (UnitSpan::routing_stats: the front's forward to the back, the back's totals to the front's
// backward) give the whole model's routing loss and gradients bit for bit, the router's included;
// a span of such a model without them is refused.
TEST(StageUnits, RoutingLossesAcrossACutEqualTheWholeModel) {
  ModelConfig c = tiny();
  c.num_experts = 4, c.num_experts_per_tok = 2, c.moe_intermediate_size = 64;
  c.output_router_logits = true, c.router_aux_loss_coef = 0.1f, c.router_z_loss_coef = 0.01f;
  const int L = int(c.num_hidden_layers), cut = 2;  // front: embedding and block 0-1
  ASSERT_GE(L, 3);
  const int64_t B = 2, T = 16, C = c.hidden_size;
  Batch b = batch(B, T);
  Transformer whole(c, Precision::fp32, LoraConfig{});
  whole.init_weights(3);
  const LossSum expected = whole.forward_backward(b.in, 1.0f);
  ASSERT_GT(expected.routing, 0.0);

  Transformer front(c, Precision::fp32, LoraConfig{}), back(c, Precision::fp32, LoraConfig{});
  for (Transformer* m : {&front, &back}) m->init_weights(3);
  front.set_units({{0, cut}});
  back.set_units({{cut + 1, L + 1}});
  DeviceBuffer x(cpu_backend(), DType::f32, B * T * C), dx(cpu_backend(), DType::f32, B * T * C);
  std::vector<double> stats;
  UnitSpan front_fwd{0, cut, {}, x.tensor(), {}, {}};
  EXPECT_THROW(front.run_units(b.in, front_fwd, false, 1.0f), Error);  // no statistics to pass on
  front_fwd.routing_stats = &stats;
  front.run_units(b.in, front_fwd, false, 1.0f);
  const std::vector<double> forwarded = stats;
  UnitSpan back_span{cut + 1, L + 1, x.tensor(), {}, {}, dx.tensor()};
  back_span.routing_stats = &stats;
  const LossSum got = back.run_units(b.in, back_span, true, 1.0f);
  EXPECT_NE(stats, forwarded);  // the totals replaced the front's
  UnitSpan front_bwd{0, cut, {}, {}, dx.tensor(), {}};
  front_bwd.routing_stats = &stats;
  front.run_units(b.in, front_bwd, true, 1.0f);
  EXPECT_EQ(got.sum, expected.sum);
  EXPECT_EQ(got.routing, expected.routing);
  int routers = 0;
  for (const std::string& name : expect_holders_gradients(whole, front, back, c, cut)) routers += moe_router_param(name);
  EXPECT_EQ(routers, L);
}

// Interleaved stages hold several chunks: the arena is planned for the largest, any of them runs.
TEST(StageUnits, SeveralRangesPlanForTheLargestAndRefuseOthers) {
  const ModelConfig c = tiny();
  const int L = int(c.num_hidden_layers);
  ASSERT_GE(L, 4);
  const int64_t B = 1, T = 8, C = c.hidden_size;
  Batch b = batch(B, T);
  Transformer m(c, Precision::fp32, LoraConfig{});
  m.init_weights(1);
  m.set_units({{2, 2}, {4, L + 1}});  // block 1; blocks 3..L-1 and the head
  DeviceBuffer x(cpu_backend(), DType::f32, B * T * C), y(cpu_backend(), DType::f32, B * T * C);
  m.run_units(b.in, UnitSpan{2, 2, x.tensor(), y.tensor(), {}, {}}, false, 1.0f);
  EXPECT_EQ(double(m.activation_bytes()), planned_arena(c, Precision::fp32, false, B, T, L - 3, true));
  m.run_units(b.in, UnitSpan{4, L + 1, y.tensor(), {}, {}, x.tensor()}, true, 1.0f);
  // Units it was not told: refused, not run past its arena.
  EXPECT_THROW(m.run_units(b.in, UnitSpan{0, 2, {}, y.tensor(), {}, {}}, false, 1.0f), Error);
  EXPECT_THROW(m.run_units(b.in, UnitSpan{2, 3, x.tensor(), y.tensor(), {}, {}}, false, 1.0f), Error);
  EXPECT_THROW(m.forward_loss(b.in), Error);
  EXPECT_THROW(m.set_units({{3, L + 2}}), Error);
}

}  // namespace
}  // namespace mt
