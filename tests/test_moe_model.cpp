// Mixture of experts (model/moe.h, model/moe_routing.h): the routing's decisions (top-k with
// torch.topk's order for ties, renormalisation, the stable expert order, a capacity's drops), the
// load-balancing and z-losses and the router's gradient against central differences; then a
// whole MoE model's gradients (router, experts, adapters, with the routing losses on) against
// central differences of its loss, the CPU backend against the reference, checkpointing, and a
// routing where every token picks the same experts.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "backend/reference_backend.h"
#include "core/error.h"
#include "finite_diff.h"
#include "model/moe_routing.h"
#include "model/param_shapes.h"
#include "model_fixtures.h"

namespace mt {
namespace {

using testing::randomize;
using testing::tiny_batch;

// ---- routing ---------------------------------------------------------------------------------

TEST(MoeRouting, TiesGoToTheLowerExpertAsTorchTopk) {
  const std::vector<float> logits = {0.5f, 0.5f, 0.5f, 0.5f,   // all equal: experts 0 and 1
                                     0.1f, 0.9f, 0.9f, 0.2f};  // 1 and 2 tie for the top
  const MoeRouting r = route_tokens(logits.data(), 2, {4, 2, true, 0.0});
  EXPECT_EQ(r.expert, (std::vector<int32_t>{0, 1, 1, 2}));
  EXPECT_FLOAT_EQ(r.weights[0], 0.5f);
  EXPECT_FLOAT_EQ(r.weights[2], 0.5f);
}

TEST(MoeRouting, WeightsAreTheSoftmaxRenormalisedOnlyWhenAsked) {
  const std::vector<float> logits = {1.0f, 2.0f, 0.0f};
  const double z = std::exp(1.0) + std::exp(2.0) + 1.0;
  const double p1 = std::exp(2.0) / z, p0 = std::exp(1.0) / z;
  const MoeRouting plain = route_tokens(logits.data(), 1, {3, 2, false, 0.0});
  EXPECT_EQ(plain.expert, (std::vector<int32_t>{1, 0}));
  EXPECT_NEAR(plain.weights[0], p1, 1e-7);
  EXPECT_NEAR(plain.weights[1], p0, 1e-7);
  const MoeRouting norm = route_tokens(logits.data(), 1, {3, 2, true, 0.0});
  EXPECT_NEAR(norm.weights[0], p1 / (p0 + p1), 1e-7);
  EXPECT_NEAR(norm.weights[1], p0 / (p0 + p1), 1e-7);
  EXPECT_NEAR(norm.lse[0], std::log(z), 1e-12);
}

TEST(MoeRouting, ExpertOrderIsStableAndTheSlotsInvertIt) {
  const int64_t N = 7, E = 3, k = 2;
  const std::vector<float> logits = test::random_normal(size_t(N * E), 11);
  const MoeRouting r = route_tokens(logits.data(), N, {E, k, true, 0.0});
  ASSERT_EQ(r.rows(), N * k);
  for (int64_t i = 0; i < N * k; ++i) {
    const int32_t row = r.slots[size_t(i)];
    ASSERT_GE(row, 0);
    EXPECT_EQ(r.token_of_row[size_t(row)], i / k);
    EXPECT_GE(row, r.offsets[size_t(r.expert[size_t(i)])]);
    EXPECT_LT(row, r.offsets[size_t(r.expert[size_t(i)]) + 1]);
  }
  for (int64_t e = 0; e < E; ++e)  // within an expert, tokens in order
    for (int64_t row = r.offsets[size_t(e)] + 1; row < r.offsets[size_t(e + 1)]; ++row)
      EXPECT_LT(r.token_of_row[size_t(row - 1)], r.token_of_row[size_t(row)]);
}

TEST(MoeRouting, ACapacityDropsTheLaterChoicesAndCountsThem) {
  // Every token prefers expert 0, then 1: capacity ceil(0.5 * 4 * 2 / 4) = 1 row an expert.
  std::vector<float> logits;
  for (int n = 0; n < 4; ++n) logits.insert(logits.end(), {3.0f, 2.0f, 0.0f, -1.0f});
  const MoeRouting r = route_tokens(logits.data(), 4, {4, 2, true, 0.5});
  EXPECT_EQ(r.rows(), 2);
  EXPECT_EQ(r.dropped, 6);
  EXPECT_EQ(r.slots[0], 0);  // token 0's choices kept, every later token's dropped
  EXPECT_EQ(r.slots[1], 1);
  for (size_t i = 2; i < r.slots.size(); ++i) EXPECT_EQ(r.slots[i], -1);
}

TEST(MoeRouting, LoadBalancingLossIsHfsFormula) {
  // Two layers' routings of 3 tokens over 2 experts, k = 1: aux = E sum_e f_e P_e over all 6.
  const std::vector<float> a = {2.0f, 0.0f, 0.0f, 1.0f, 0.5f, 0.0f}, b = {0.0f, 0.0f, -1.0f, 1.0f, 3.0f, 2.0f};
  MoeBalanceStats s;
  const MoeRouting ra = route_tokens(a.data(), 3, {2, 1, false, 0.0});
  const MoeRouting rb = route_tokens(b.data(), 3, {2, 1, false, 0.0});
  add_balance_stats(s, ra, nullptr);
  add_balance_stats(s, rb, nullptr);
  double f[2] = {0, 0}, P[2] = {0, 0}, z = 0;
  for (const MoeRouting* r : {&ra, &rb})
    for (int n = 0; n < 3; ++n) {
      f[r->expert[size_t(n)]] += 1.0 / 6.0;
      for (int e = 0; e < 2; ++e) P[e] += double(r->probs[size_t(n * 2 + e)]) / 6.0;
      z += r->lse[size_t(n)] * r->lse[size_t(n)] / 6.0;
    }
  EXPECT_NEAR(load_balancing_loss(s), 2.0 * (f[0] * P[0] + f[1] * P[1]), 1e-12);
  EXPECT_NEAR(router_z_loss(s), z, 1e-12);
  // A token not counted (padding) leaves the statistics.
  MoeBalanceStats masked;
  const uint8_t counted[3] = {1, 0, 1};
  add_balance_stats(masked, ra, counted);
  EXPECT_EQ(masked.tokens, 2.0);
}

// F(logits) = sum_j g_j w_j + a aux + b z over one layer's routing, differentiated by
// route_backward and by central differences (the top-k stays put under the small steps).
void check_route_backward(bool renormalize) {
  const int64_t N = 5, E = 4, k = 2;
  const MoeRoutingConfig cfg{E, k, renormalize, 0.0};
  const std::vector<float> logits0 = test::random_normal(size_t(N * E), 3);
  const std::vector<float> g = test::random_normal(size_t(N * k), 4);
  const double a = 0.7, b = 0.3, scale = 1.5;
  const MoeRouting r0 = route_tokens(logits0.data(), N, cfg);
  auto F = [&](const std::vector<float>& z) {
    const MoeRouting r = route_tokens(z.data(), N, cfg);
    MoeBalanceStats s;
    add_balance_stats(s, r, nullptr);
    // The aux loss's f_e are counts: fixed where the top-k is (HF detaches nothing but they are
    // piecewise constant); the finite difference sees only P_e move.
    double f = 0.0;
    for (size_t i = 0; i < g.size(); ++i) f += double(g[i]) * double(r.weights[i]);
    EXPECT_EQ(r.expert, r0.expert) << "a step moved the top-k: pick another seed";
    return f + scale * (a * load_balancing_loss(s) + b * router_z_loss(s));
  };
  MoeBalanceStats s0;
  add_balance_stats(s0, r0, nullptr);
  std::vector<float> dlogits(size_t(N * E));
  route_backward(dlogits.data(), r0, g.data(), cfg, s0, nullptr, a, b, scale);
  test::expect_grad_near(dlogits, test::central_diff(F, logits0, 1e-3f), "dlogits", 2e-3, 2e-4);
}

TEST(MoeRouting, BackwardMatchesFiniteDifferences) { check_route_backward(false); }
TEST(MoeRouting, RenormalisedBackwardMatchesFiniteDifferences) { check_route_backward(true); }

// ---- a whole MoE model -----------------------------------------------------------------------

// tiny_config with four experts of width 8, two a token: layer 0 MoE, layer 1 dense (Qwen3-MoE's
// mlp_only_layers), the routing losses on with coefficients large enough to see.
ModelConfig moe_config(bool renormalize = true) {
  ModelConfig c = testing::tiny_config();
  c.model_type = "qwen3_moe";
  c.num_experts = 4, c.num_experts_per_tok = 2, c.moe_intermediate_size = 8;
  c.norm_topk_prob = renormalize;
  c.mlp_only_layers = {1};
  c.output_router_logits = true, c.router_aux_loss_coef = 0.3f, c.router_z_loss_coef = 0.05f;
  return c;
}

// The training objective's mean: the tokens' loss and the routing losses.
double mean_loss(Transformer& m, const ModelInput& in) {
  const LossSum s = m.forward_loss(in);
  return s.sum / double(s.count) + s.routing;
}

// A step small enough that no token's top-k changes under it (a change is a jump in the loss,
// which a difference quotient turns into a huge slope), large enough for f32's rounding.
void check_store(Transformer& m, ParamStore& store, const ModelInput& in) {
  const float eps = 1e-3f;
  for (auto& p : store.params()) {
    ASSERT_NE(p.grad, nullptr) << p.name;
    for (int64_t idx : {int64_t(0), p.numel / 3, p.numel / 2, p.numel - 1}) {
      const float saved = p.master[idx];
      p.master[idx] = saved + eps;
      const double up = mean_loss(m, in);
      p.master[idx] = saved - eps;
      const double down = mean_loss(m, in);
      p.master[idx] = saved;
      const double fd = (up - down) / (2.0 * eps);
      EXPECT_NEAR(p.grad[idx], fd, 2e-3 + 2e-2 * std::abs(fd)) << p.name << "[" << idx << "]";
    }
  }
}

TEST(MoeModel, DeclaresTheRouterAndEveryExpertInPlaceOfTheMlp) {
  const ModelConfig c = moe_config();
  std::vector<std::string> names;
  for (const ParamShape& p : llama_param_shapes(c, LoraConfig{})) names.push_back(p.name);
  auto has = [&](const std::string& n) { return std::find(names.begin(), names.end(), n) != names.end(); };
  EXPECT_TRUE(has("model.layers.0.mlp.gate.weight"));
  EXPECT_TRUE(has("model.layers.0.mlp.experts.3.down_proj.weight"));
  EXPECT_FALSE(has("model.layers.0.mlp.gate_proj.weight"));
  EXPECT_TRUE(has("model.layers.1.mlp.gate_proj.weight"));  // mlp_only_layers: dense
  EXPECT_FALSE(has("model.layers.1.mlp.gate.weight"));
  ModelConfig mixtral = c;
  mixtral.model_type = "mixtral", mixtral.mlp_only_layers.clear();
  names.clear();
  for (const ParamShape& p : llama_param_shapes(mixtral, LoraConfig{})) names.push_back(p.name);
  EXPECT_TRUE(has("model.layers.1.block_sparse_moe.gate.weight"));
  EXPECT_TRUE(has("model.layers.1.block_sparse_moe.experts.2.w3.weight"));  // up
  // QLoRA keeps the router as it is and quantises the experts.
  EXPECT_FALSE(quantized_in_qlora({"model.layers.1.block_sparse_moe.gate.weight", {4, 16}}));
  EXPECT_TRUE(quantized_in_qlora({"model.layers.1.block_sparse_moe.experts.2.w3.weight", {8, 16}}));
}

class MoeGradients : public ::testing::TestWithParam<bool> {};  // param: norm_topk_prob

TEST_P(MoeGradients, FullTrainingMatchesFiniteDifferences) {
  Transformer m(moe_config(GetParam()), Precision::fp32, LoraConfig{});
  m.init_weights(1);
  randomize(m.base(), 2, 0.3f);
  auto batch = tiny_batch(32);
  const ModelInput in = batch.input();
  m.base().zero_grad();
  const LossSum s = m.forward_backward(in, 1.0f / float(batch.B * batch.T - 1));
  ASSERT_EQ(s.count, batch.B * batch.T - 1);
  check_store(m, m.base(), in);
}

TEST_P(MoeGradients, LoraOnTheExpertsMatchesFiniteDifferences) {
  LoraConfig lora;
  lora.enabled = true, lora.rank = 2, lora.alpha = 4.0f;
  lora.targets = {"q", "v", "gate", "up", "down"};
  Transformer m(moe_config(GetParam()), Precision::fp32, lora);
  m.init_weights(1);
  randomize(m.base(), 2, 0.3f);
  randomize(m.adapters(), 3, 0.3f);
  bool expert_adapter = false;
  for (auto& p : m.adapters().params()) expert_adapter |= p.name.find(".experts.") != std::string::npos;
  EXPECT_TRUE(expert_adapter);
  auto batch = tiny_batch(32);
  const ModelInput in = batch.input();
  m.adapters().zero_grad();
  m.forward_backward(in, 1.0f / float(batch.B * batch.T - 1));
  check_store(m, m.adapters(), in);
}

// lora.train_router: the router's trainable copy among the adapters (PEFT's modules_to_save),
// used in the router's place: its gradient, the routing losses' included, against finite
// differences of the loss; the frozen router gets none.
TEST_P(MoeGradients, LoraWithTheRouterTrainedMatchesFiniteDifferences) {
  LoraConfig lora;
  lora.enabled = true, lora.rank = 2, lora.alpha = 4.0f, lora.train_router = true;
  lora.targets = {"q", "gate", "down"};
  Transformer m(moe_config(GetParam()), Precision::fp32, lora);
  m.init_weights(1);
  randomize(m.base(), 2, 0.3f);
  // The copy starts as the router (Transformer::init_adapters, after the base is set).
  m.init_adapters(1);
  const Param& router = m.base().get("model.layers.0.mlp.gate.weight");
  Param& copy = m.adapters().get("model.layers.0.mlp.gate.modules_to_save.weight");
  EXPECT_EQ(std::vector<float>(copy.master, copy.master + copy.numel),
            std::vector<float>(router.master, router.master + router.numel));
  EXPECT_EQ(router.grad, nullptr);  // frozen
  randomize(m.adapters(), 3, 0.3f);  // the copy now routes otherwise than the router would
  auto batch = tiny_batch(32);
  const ModelInput in = batch.input();
  m.adapters().zero_grad();
  m.forward_backward(in, 1.0f / float(batch.B * batch.T - 1));
  check_store(m, m.adapters(), in);
}

// train.moe_capacity_factor: each expert takes at most ceil(factor x N x k / E) rows; the dropped
// choices add nothing (their weight is lost, as Switch drops) and are counted in LossSum::dropped.
// The gradients through what is kept against finite differences; dropless counts none.
TEST_P(MoeGradients, ACapacityFactorDropsCountsAndMatchesFiniteDifferences) {
  Transformer m(moe_config(GetParam()), Precision::fp32, LoraConfig{});
  m.init_weights(1);
  randomize(m.base(), 2, 0.3f);
  auto batch = tiny_batch(32);
  const ModelInput in = batch.input();
  EXPECT_EQ(m.forward_loss(in).dropped, 0);  // dropless
  const double dropless = mean_loss(m, in);
  m.set_moe_capacity_factor(0.5f);  // 12 tokens x 2 choices / 4 experts x 0.5: 3 rows an expert
  const int64_t dropped = m.forward_loss(in).dropped;
  EXPECT_GE(dropped, 12 * 2 - 4 * 3);  // of 24 choices, at most 12 rows kept (one MoE layer)
  EXPECT_NE(mean_loss(m, in), dropless);
  m.base().zero_grad();
  const LossSum s = m.forward_backward(in, 1.0f / float(batch.B * batch.T - 1));
  EXPECT_EQ(s.dropped, dropped);
  check_store(m, m.base(), in);
}

// The rows an ep rank's experts hold room for: dropless, ep x its own N k (any shard's tokens may
// all choose them); with a capacity factor, E x ceil(f N k / E) (each shard keeps that many choices
// an expert), never below its own N k, never above dropless; without ep, N k.
TEST(MoeModel, ExpertRowsUnderACapacityFactor) {
  ModelConfig c = moe_config();  // k = 2 of E = 4
  ASSERT_EQ(c.num_experts, 4);
  ASSERT_EQ(c.num_experts_per_tok, 2);
  EXPECT_EQ(moe_expert_rows(c, 32), 64);
  c.moe_capacity_factor = 1.5f;
  EXPECT_EQ(moe_expert_rows(c, 32), 64);  // one shard: its own N k
  c.moe_local_experts = 2;                // ep = 2
  EXPECT_EQ(moe_expert_rows(c, 32), 4 * 24);  // ceil(1.5 x 64 / 4) = 24 an expert
  c.moe_capacity_factor = 0.5f;
  EXPECT_EQ(moe_expert_rows(c, 32), 64);  // E x 8 = 32, but its own 64 rows are sent from here
  c.moe_capacity_factor = 3.0f;
  EXPECT_EQ(moe_expert_rows(c, 32), 128);  // E x 48 > dropless
  c.moe_capacity_factor = 0.0f;
  EXPECT_EQ(moe_expert_rows(c, 32), 128);
  c.moe_local_experts = 1;  // ep = 4: dropless 4 x 64
  EXPECT_EQ(moe_expert_rows(c, 32), 256);
  c.moe_capacity_factor = 1.0f;
  EXPECT_EQ(moe_expert_rows(c, 33), 4 * 17);  // ceil(66 / 4) = 17
}

INSTANTIATE_TEST_SUITE_P(Moe, MoeGradients, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Renormalised" : "Plain"; });

// OLMoE's block: q and k normalised over their whole projections (weights [q_dim], [kv_dim]),
// every layer sparse, the chosen weights unnormalised.
ModelConfig olmoe_config() {
  ModelConfig c = moe_config(/*renormalize=*/false);
  c.model_type = "olmoe";
  c.mlp_only_layers.clear();
  c.qk_norm = c.qk_norm_whole = true;
  return c;
}

TEST(MoeModel, OlmoeWholeProjectionNormsMatchFiniteDifferences) {
  Transformer m(olmoe_config(), Precision::fp32, LoraConfig{});
  EXPECT_EQ(m.base().get("model.layers.0.self_attn.q_norm.weight").numel, 16);  // q_dim
  EXPECT_EQ(m.base().get("model.layers.0.self_attn.k_norm.weight").numel, 8);   // kv_dim
  m.init_weights(1);
  randomize(m.base(), 2, 0.3f);
  auto batch = tiny_batch(32);
  const ModelInput in = batch.input();
  m.base().zero_grad();
  m.forward_backward(in, 1.0f / float(batch.B * batch.T - 1));
  check_store(m, m.base(), in);
}

TEST(MoeModel, OlmoeOnCpuMatchesTheReference) {
  auto run = [&](Backend& be) {
    Transformer m(olmoe_config(), Precision::fp32, LoraConfig{}, true, be);
    m.init_weights(1);
    std::vector<float> v;
    for (auto& p : m.base().params()) {
      v.resize(size_t(p.numel));
      fill_normal(v.data(), p.numel, 0.3f, 2, p.name);
      if (p.shape.size() == 1)
        for (float& x : v) x += 1.0f;
      m.base().set_values(p, v.data());
    }
    auto batch = tiny_batch(32);
    const LossSum s = m.forward_loss(batch.input());
    return s.sum / double(s.count) + s.routing;
  };
  const double ref = run(reference_backend()), cpu = run(cpu_backend());
  EXPECT_NEAR(cpu, ref, 1e-5 * std::abs(ref));
}

TEST(MoeModel, RoutingLossesAreReportedBesideTheTokensLoss) {
  ModelConfig c = moe_config();
  auto batch = tiny_batch(32);
  auto loss = [&](bool on, bool z) {
    ModelConfig cc = c;
    cc.output_router_logits = on;
    if (!z) cc.router_z_loss_coef = 0.0f;
    Transformer m(cc, Precision::fp32, LoraConfig{});
    m.init_weights(1);
    randomize(m.base(), 2, 0.3f);
    return m.forward_loss(batch.input());
  };
  // Off in the published configs (output_router_logits false, no z-loss): nothing beside the tokens.
  const LossSum off = loss(false, false), aux = loss(true, false), both = loss(true, true);
  EXPECT_EQ(off.routing, 0.0);
  EXPECT_EQ(aux.sum, off.sum);  // the tokens' loss is the same model's
  // aux_coef * E sum_e f_e P_e: with k = 2 the f_e sum to 2, so E sum f P >= 2 (equality when
  // balanced): aux_coef * 2 at least.
  EXPECT_GE(aux.routing, c.router_aux_loss_coef * 2.0 * (1 - 1e-6));
  EXPECT_GT(both.routing, aux.routing);  // + z_coef * mean logsumexp^2
}

// A row's padding (data/packing.h) is what HF's attention mask leaves out: the routing losses do
// not count it. Padding at a row's end changes nothing the row's tokens see (causal attention)
// and carries no token loss, so a padded row trains exactly as the same tokens without it: the
// same routing losses and the same gradients. Counted, its routing would move both.
TEST(MoeModel, RoutingLossesLeaveARowsPaddingOut) {
  const ModelConfig c = moe_config();
  const int64_t T = 6, pad = 3;
  const testing::TinyBatch real = tiny_batch(32, 7, 1, T);
  testing::TinyBatch padded = tiny_batch(32, 9, 1, T + pad);
  std::vector<int32_t> padding(size_t(T + pad), 0);
  for (int64_t t = 0; t < T; ++t)
    padded.tokens[size_t(t)] = real.tokens[size_t(t)], padded.targets[size_t(t)] = real.targets[size_t(t)];
  for (int64_t t = T; t < T + pad; ++t)
    padded.tokens[size_t(t)] = 0, padded.targets[size_t(t)] = -1, padding[size_t(t)] = 1;
  auto run = [&](const ModelInput& in, std::vector<float>& grads) {
    Transformer m(c, Precision::fp32, LoraConfig{});
    m.init_weights(1);
    randomize(m.base(), 2, 0.3f);
    const LossSum s = m.forward_backward(in, 0.1f);
    for (auto& p : m.base().params()) grads.insert(grads.end(), p.grad, p.grad + p.numel);
    return s;
  };
  std::vector<float> g_real, g_padded, g_counted;
  const LossSum a = run(real.input(), g_real);
  ModelInput in = padded.input();
  in.padding = padding.data();
  const LossSum b = run(in, g_padded);
  EXPECT_EQ(a.count, b.count);
  EXPECT_NEAR(b.sum, a.sum, 1e-6 * std::abs(a.sum));
  EXPECT_NEAR(b.routing, a.routing, 1e-6 * a.routing);
  ASSERT_EQ(g_real.size(), g_padded.size());
  double worst = 0.0;
  for (size_t i = 0; i < g_real.size(); ++i) worst = std::max(worst, double(std::abs(g_real[i] - g_padded[i])));
  EXPECT_LT(worst, 1e-6);
  // Without the mask the padding's routing counts: the losses and gradients move.
  const LossSum counted = run(padded.input(), g_counted);
  EXPECT_GT(std::abs(counted.routing - a.routing), 1e-4 * a.routing);
}

TEST(MoeModel, CheckpointingGivesTheSameGradients) {
  auto grads = [&](bool ckpt) {
    Transformer m(moe_config(), Precision::fp32, LoraConfig{});
    m.init_weights(1);
    randomize(m.base(), 2, 0.3f);
    m.set_activation_checkpointing(ckpt);
    auto batch = tiny_batch(32);
    m.base().zero_grad();
    m.forward_backward(batch.input(), 0.1f);
    return std::vector<float>(m.base().grad_data(), m.base().grad_data() + m.base().trainable_numel());
  };
  EXPECT_EQ(grads(false), grads(true));
}

TEST(MoeModel, CpuMatchesTheReferenceBackend) {
  for (Precision prec : {Precision::fp32, Precision::bf16}) {
    auto run = [&](Backend& be, std::vector<float>& grads) {
      Transformer m(moe_config(), prec, LoraConfig{}, true, be);
      m.init_weights(1);
      std::vector<float> v;
      for (auto& p : m.base().params()) {  // the same random weights on either backend
        v.resize(size_t(p.numel));
        fill_normal(v.data(), p.numel, 0.3f, 2, p.name);
        if (p.shape.size() == 1)
          for (float& x : v) x += 1.0f;
        m.base().set_values(p, v.data());
      }
      auto batch = tiny_batch(32);
      m.base().zero_grad();
      const LossSum s = m.forward_backward(batch.input(), 0.1f);
      grads.resize(size_t(m.base().trainable_numel()));
      be.copy_to_host(grads.data(), m.base().trainable_grads());
      return s.sum / double(s.count);
    };
    std::vector<float> g_ref, g_cpu;
    const double ref = run(reference_backend(), g_ref), cpu = run(cpu_backend(), g_cpu);
    const double tol = prec == Precision::fp32 ? 1e-5 : 2e-2;
    EXPECT_NEAR(cpu, ref, tol * std::abs(ref)) << (prec == Precision::fp32 ? "fp32" : "bf16");
    ASSERT_EQ(g_ref.size(), g_cpu.size());
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < g_ref.size(); ++i)
      num += std::pow(double(g_cpu[i]) - g_ref[i], 2), den += std::pow(double(g_ref[i]), 2);
    EXPECT_LT(std::sqrt(num / den), prec == Precision::fp32 ? 1e-5 : 3e-2) << "relative gradient error";
  }
}

TEST(MoeModel, EveryTokenToTheSameExpertsTrains) {
  // A zero router: every probability equal, every token to experts 0 and 1 (the ties' order).
  Transformer m(moe_config(), Precision::fp32, LoraConfig{});
  m.init_weights(1);
  randomize(m.base(), 2, 0.3f);
  Param& router = m.base().get("model.layers.0.mlp.gate.weight");
  std::fill(router.master, router.master + router.numel, 0.0f);
  auto batch = tiny_batch(32);
  m.base().zero_grad();
  const LossSum s = m.forward_backward(batch.input(), 0.1f);
  EXPECT_TRUE(std::isfinite(s.sum));
  auto grad_norm = [&](const std::string& name) {
    const Param& p = m.base().get(name);
    double n = 0.0;
    for (int64_t i = 0; i < p.numel; ++i) n += double(p.grad[i]) * p.grad[i];
    return n;
  };
  EXPECT_GT(grad_norm("model.layers.0.mlp.experts.0.down_proj.weight"), 0.0);
  EXPECT_GT(grad_norm("model.layers.0.mlp.experts.1.up_proj.weight"), 0.0);
  EXPECT_EQ(grad_norm("model.layers.0.mlp.experts.2.down_proj.weight"), 0.0);
  EXPECT_EQ(grad_norm("model.layers.0.mlp.experts.3.gate_proj.weight"), 0.0);
  EXPECT_GT(grad_norm("model.layers.0.mlp.gate.weight"), 0.0);  // the router learns to choose
}

TEST(MoeModel, BadExpertKeysAreOneLine) {
  ModelConfig c = moe_config();
  c.num_experts_per_tok = 5;
  EXPECT_THROW(c.validate(), Error);
  c = moe_config();
  c.mlp_only_layers = {7};
  EXPECT_THROW(c.validate(), Error);
  c = moe_config();
  c.moe_intermediate_size = 0;
  EXPECT_THROW(c.validate(), Error);
}

}  // namespace
}  // namespace mt
