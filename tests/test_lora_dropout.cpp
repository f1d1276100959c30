// LoRA dropout (lora.dropout): the dropout op on every host backend against the textbook kernel,
// its mask (keep rate, scaling, determinism, independence of how a tensor is split), the adapter's
// forward and backward against finite differences, and the model: exact when off or in
// evaluation, deterministic in training, the same however a batch is cut.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "backend/reference_backend.h"
#include "core/bf16.h"
#include "finite_diff.h"
#include "kernels/device_math/cp_positions.h"
#include "model/linear.h"
#include "model_fixtures.h"

namespace mt {
namespace {

using test::central_diff;
using test::expect_grad_near;
using test::projection;
using test::random_normal;

Tensor host(std::vector<float>& v, int64_t rows, int64_t cols, Backend& be) {
  return Tensor(v.data(), DType::f32, rows, cols, be.device());
}

std::vector<float> dropped(Backend& be, std::vector<float> x, int64_t rows, int64_t cols, const DropoutMask& m,
                           std::vector<float> y = {}) {
  const bool accumulate = !y.empty();
  if (!accumulate) y.assign(x.size(), -7.0f);  // overwritten
  be.dropout(host(y, rows, cols, be), host(x, rows, cols, be), m, accumulate);
  return y;
}

TEST(DropoutOp, CpuMatchesTheReferenceInF32AndBf16) {
  const int64_t rows = 37, cols = 53;
  const std::vector<float> x = random_normal(size_t(rows * cols), 3), y0 = random_normal(size_t(rows * cols), 4);
  const DropoutMask m{.key = 99, .p = 0.3f, .row0 = 5, .col0 = 11};
  for (bool accumulate : {false, true}) {
    const auto cpu = dropped(cpu_backend(), x, rows, cols, m, accumulate ? y0 : std::vector<float>{});
    const auto ref = dropped(reference_backend(), x, rows, cols, m, accumulate ? y0 : std::vector<float>{});
    for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(cpu[i], ref[i], 1e-6f * (1 + std::fabs(ref[i]))) << i;
  }
  // bf16: the same elements kept, each rounded once.
  std::vector<bf16> xb(x.size()), yc(x.size()), yr(x.size());
  for (size_t i = 0; i < x.size(); ++i) xb[i] = float_to_bf16(x[i]);
  auto run = [&](Backend& be, std::vector<bf16>& y) {
    be.dropout(Tensor(y.data(), DType::bf16, rows, cols, be.device()),
               Tensor(xb.data(), DType::bf16, rows, cols, be.device()), m, false);
  };
  run(cpu_backend(), yc);
  run(reference_backend(), yr);
  for (size_t i = 0; i < x.size(); ++i) {
    const float c = to_float(yc[i]), r = to_float(yr[i]);
    ASSERT_NEAR(c, r, 8e-3f * std::fabs(r)) << i;  // one bf16 rounding of x / (1 - p) either way
    ASSERT_EQ(c == 0.0f, r == 0.0f) << i;
  }
}

TEST(DropoutOp, KeepsOneMinusPAndScalesTheKept) {
  const int64_t rows = 256, cols = 512;
  const std::vector<float> x(size_t(rows * cols), 1.5f);
  for (float p : {0.1f, 0.5f, 0.9f}) {
    const auto y = dropped(cpu_backend(), x, rows, cols, {.key = 7, .p = p});
    int64_t kept = 0;
    for (float v : y) {
      if (v == 0.0f) continue;
      ++kept;
      ASSERT_EQ(v, 1.5f * (1.0f / (1.0f - p)));  // inverted dropout: the kept scaled by 1 / (1 - p)
    }
    const double rate = double(kept) / double(x.size()), n = double(x.size());
    // Binomial: 5 standard deviations of the keep rate.
    EXPECT_NEAR(rate, 1.0 - p, 5.0 * std::sqrt(p * (1 - p) / n)) << "p = " << p;
  }
  const auto none = dropped(cpu_backend(), x, rows, cols, {.key = 7, .p = 0.0f});
  EXPECT_EQ(none, x);
}

// The mask is a function of (key, global row, global column): the same again, a different one
// for another key, and a block of a tensor (a data-parallel slice of rows, a tensor-parallel
// share of columns) gets exactly the whole tensor's mask on its elements.
TEST(DropoutOp, TheMaskDependsOnlyOnKeyAndGlobalPosition) {
  const int64_t rows = 16, cols = 24;
  const std::vector<float> x = random_normal(size_t(rows * cols), 5);
  const DropoutMask m{.key = 1234, .p = 0.5f};
  const auto whole = dropped(cpu_backend(), x, rows, cols, m);
  EXPECT_EQ(dropped(cpu_backend(), x, rows, cols, m), whole);
  DropoutMask other = m;
  other.key = 1235;
  EXPECT_NE(dropped(cpu_backend(), x, rows, cols, other), whole);
  const int64_t r0 = 4, nr = 8, c0 = 6, nc = 12;
  std::vector<float> block;
  for (int64_t r = r0; r < r0 + nr; ++r)
    for (int64_t c = c0; c < c0 + nc; ++c) block.push_back(x[size_t(r * cols + c)]);
  const auto part = dropped(cpu_backend(), block, nr, nc, {.key = 1234, .p = 0.5f, .row0 = r0, .col0 = c0});
  for (int64_t r = 0; r < nr; ++r)
    for (int64_t c = 0; c < nc; ++c)
      ASSERT_EQ(part[size_t(r * nc + c)], whole[size_t((r0 + r) * cols + c0 + c)]) << r << "," << c;
}

// Context parallelism: a cp rank holds chunks r and 2cp-1-r of every sequence. With the mask's cp
// fields its rows drop exactly the elements of those tokens that the whole sequences drop, on the
// CPU and the reference backend (one hash, dm::dropout_global_row), for cp = 2 and 3 and a share
// that starts at a later sequence (row0: micro-batches and dp slices start further in).
TEST(DropoutOp, ContextParallelSharesDropWhatTheWholeSequencesDrop) {
  const int64_t seqs = 3, S = 12, cols = 10;
  const std::vector<float> x = random_normal(size_t(seqs * S * cols), 6);
  for (Backend* be : {&cpu_backend(), &reference_backend()})
    for (int64_t cp : {2, 3}) {
      const int64_t T = S / cp, first = 1;  // the share holds sequences 1 and 2 of the whole
      const DropoutMask whole_mask{.key = 77, .p = 0.4f};
      const auto whole = dropped(*be, x, seqs * S, cols, whole_mask);
      for (int64_t rank = 0; rank < cp; ++rank) {
        std::vector<float> share;
        for (int64_t b = first; b < seqs; ++b)
          for (int64_t t = 0; t < T; ++t) {
            const int64_t row = b * S + dm::cp_query_position(t, T, cp, rank);
            share.insert(share.end(), x.begin() + row * cols, x.begin() + (row + 1) * cols);
          }
        const DropoutMask m{.key = 77, .p = 0.4f, .row0 = first * T, .cp = cp, .cp_rank = rank, .share_len = T};
        const auto part = dropped(*be, share, (seqs - first) * T, cols, m);
        int64_t differ = 0;  // from the mask of the share's own row index (what the refusal guarded)
        const auto naive = dropped(*be, share, (seqs - first) * T, cols, {.key = 77, .p = 0.4f, .row0 = first * T});
        for (int64_t b = first; b < seqs; ++b)
          for (int64_t t = 0; t < T; ++t)
            for (int64_t c = 0; c < cols; ++c) {
              const size_t at = size_t(((b - first) * T + t) * cols + c);
              const int64_t row = b * S + dm::cp_query_position(t, T, cp, rank);
              ASSERT_EQ(part[at], whole[size_t(row * cols + c)]) << be->name() << " cp " << cp << " rank " << rank;
              differ += naive[at] != part[at];
            }
        EXPECT_GT(differ, 0) << "the share's own row index draws other masks";
      }
    }
  std::vector<float> a(8), b(8);
  EXPECT_THROW(cpu_backend().dropout(host(a, 2, 4, cpu_backend()), host(b, 2, 4, cpu_backend()),
                                     {.p = 0.5f, .cp = 2, .cp_rank = 2, .share_len = 2}, false),
               Error);  // no such rank
  EXPECT_THROW(cpu_backend().dropout(host(a, 2, 4, cpu_backend()), host(b, 2, 4, cpu_backend()),
                                     {.p = 0.5f, .cp = 2, .cp_rank = 0, .share_len = 3}, false),
               Error);  // a share is two equal chunks
}

TEST(DropoutOp, BadArgumentsAreRefused) {
  std::vector<float> a(6), b(6);
  Backend& be = cpu_backend();
  EXPECT_THROW(be.dropout(host(a, 2, 3, be), host(a, 2, 3, be), {.p = 0.5f}, false), Error);  // aliased
  EXPECT_THROW(be.dropout(host(a, 2, 3, be), host(b, 3, 2, be), {.p = 0.5f}, false), Error);  // shapes
  EXPECT_THROW(be.dropout(host(a, 2, 3, be), host(b, 2, 3, be), {.p = 1.0f}, false), Error);  // p
}

// y = x W^T + s dropout(x) A^T B^T: the backward's dx, dA and dB against central differences of
// the forward with the same mask, on the CPU and reference backends.
TEST(DropoutLora, BackwardMatchesFiniteDifferences) {
  const int64_t M = 5, in = 7, out = 6, r = 3;
  for (Backend* be : {&cpu_backend(), &reference_backend()}) {
    SCOPED_TRACE(be->name());
    std::vector<float> x = random_normal(size_t(M * in), 1), W = random_normal(size_t(out * in), 2, 0.3f);
    std::vector<float> A = random_normal(size_t(r * in), 3, 0.5f), B = random_normal(size_t(out * r), 4, 0.5f);
    const std::vector<float> R = random_normal(size_t(M * out), 5);
    std::vector<float> scratch(size_t(M * in)), u(size_t(M * r)), y(size_t(M * out));
    const AdapterDropout drop{.mask = {.key = 42, .p = 0.4f, .row0 = 3, .col0 = 2},
                              .scratch = host(scratch, 1, M * in, *be)};
    auto weights = [&](std::vector<float>& a, std::vector<float>& b) {
      LinearWeights w;
      w.W = host(W, out, in, *be), w.A = host(a, r, in, *be), w.B = host(b, out, r, *be);
      w.scale = 1.5f;
      return w;
    };
    auto loss = [&](std::vector<float>& xv, std::vector<float>& a, std::vector<float>& b) {
      linear_layer_forward(*be, host(y, M, out, *be), host(u, M, r, *be), host(xv, M, in, *be), weights(a, b), &drop);
      return projection(y, R);
    };
    loss(x, A, B);
    std::vector<float> dy = R, dx(size_t(M * in)), dA(size_t(r * in)), dB(size_t(out * r)), du(size_t(M * r));
    LinearWeights w = weights(A, B);
    w.dA = host(dA, r, in, *be), w.dB = host(dB, out, r, *be);
    linear_layer_backward(*be, host(dx, M, in, *be), false, host(du, M, r, *be), host(dy, M, out, *be),
                          host(x, M, in, *be), host(u, M, r, *be), w, &drop);
    expect_grad_near(dx, central_diff([&](std::vector<float> v) { return loss(v, A, B); }, x), "dx");
    expect_grad_near(dA, central_diff([&](std::vector<float> v) { return loss(x, v, B); }, A), "dA");
    expect_grad_near(dB, central_diff([&](std::vector<float> v) { return loss(x, A, v); }, B), "dB");
    // The mask matters: without it the gradient of A differs.
    std::vector<float> dA_plain(dA.size());
    w.dA = host(dA_plain, r, in, *be);
    std::fill(dB.begin(), dB.end(), 0.0f);
    linear_layer_forward(*be, host(y, M, out, *be), host(u, M, r, *be), host(x, M, in, *be), w);
    linear_layer_backward(*be, host(dx, M, in, *be), false, host(du, M, r, *be), host(dy, M, out, *be),
                          host(x, M, in, *be), host(u, M, r, *be), w);
    EXPECT_NE(dA_plain, dA);
  }
}

LoraConfig adapters(float dropout) {
  LoraConfig lora;
  lora.enabled = true;
  lora.rank = 4;
  lora.alpha = 8.0f;
  lora.targets = {"q", "k", "v", "o", "gate", "up", "down", "lm_head"};
  lora.dropout = dropout;
  return lora;
}

struct Pass {
  double loss;
  std::vector<float> grads;
};

Pass train_pass(Transformer& m, const std::vector<ModelInput>& inputs) {
  m.adapters().zero_grad();
  double loss = 0;
  for (const ModelInput& in : inputs) loss += m.forward_backward(in, 1.0f).sum;
  const float* g = m.adapters().grad_data();
  return {loss, std::vector<float>(g, g + m.adapters().trainable_numel())};
}

ModelInput noisy(ModelInput in, int64_t step, int64_t first_row = 0) {
  in.noise = {.on = true, .seed = 1234, .step = step, .first_row = first_row};
  return in;
}

std::unique_ptr<Transformer> model_with(float dropout, Precision precision = Precision::fp32) {
  auto m = std::make_unique<Transformer>(testing::tiny_config(), precision, adapters(dropout));
  m->init_weights(5);
  testing::randomize(m->adapters(), 9, 0.2f);
  return m;
}

// Dropout 0 (the default) runs nothing and draws nothing: a training pass is bit-identical to
// one without noise; and evaluation (no noise) is the same with any dropout.
TEST(DropoutModel, OffOrInEvaluationItChangesNothing) {
  for (Precision precision : {Precision::fp32, Precision::bf16}) {
    const auto batch = testing::tiny_batch(32);
    auto plain_model = model_with(0.0f, precision), dropping_model = model_with(0.5f, precision);
    Transformer &plain = *plain_model, &dropping = *dropping_model;
    const Pass a = train_pass(plain, {batch.input()});
    const Pass b = train_pass(plain, {noisy(batch.input(), 3)});
    EXPECT_EQ(a.loss, b.loss);
    EXPECT_EQ(0, std::memcmp(a.grads.data(), b.grads.data(), a.grads.size() * sizeof(float)));
    EXPECT_EQ(plain.forward_loss(batch.input()).sum, dropping.forward_loss(batch.input()).sum);
    const Pass c = train_pass(dropping, {batch.input()});
    EXPECT_EQ(a.loss, c.loss);
    EXPECT_EQ(0, std::memcmp(a.grads.data(), c.grads.data(), a.grads.size() * sizeof(float)));
  }
}

TEST(DropoutModel, TrainingPassesAreDeterministicPerStepAndDiffer) {
  const auto batch = testing::tiny_batch(32);
  auto model = model_with(0.3f);
  Transformer& m = *model;
  const Pass clean = train_pass(m, {batch.input()});
  const Pass a = train_pass(m, {noisy(batch.input(), 3)});
  const Pass again = train_pass(m, {noisy(batch.input(), 3)});
  const Pass next = train_pass(m, {noisy(batch.input(), 4)});
  EXPECT_EQ(a.loss, again.loss);
  EXPECT_EQ(a.grads, again.grads);
  EXPECT_NE(a.loss, clean.loss);
  EXPECT_NE(a.loss, next.loss);
  // Activation checkpointing recomputes the forward with the same masks.
  m.set_activation_checkpointing(true);
  const Pass checkpointed = train_pass(m, {noisy(batch.input(), 3)});
  EXPECT_EQ(a.loss, checkpointed.loss);
  for (size_t i = 0; i < a.grads.size(); ++i) ASSERT_NEAR(a.grads[i], checkpointed.grads[i], 1e-6f) << i;
}

// A batch of 4 sequences as one input, or as 4 inputs of one (micro-batches, data-parallel
// slices) starting at their rows: the same masks, so the same loss and gradients.
TEST(DropoutModel, TheSameMasksHoweverTheBatchIsCut) {
  const auto batch = testing::tiny_batch(32, 7, 4, 6);
  auto model = model_with(0.3f);
  Transformer& m = *model;
  const Pass whole = train_pass(m, {noisy(batch.input(), 2)});
  std::vector<ModelInput> rows;
  for (int64_t b = 0; b < 4; ++b) {
    ModelInput in = noisy(batch.input(), 2, b);
    in.tokens += b * 6, in.targets += b * 6, in.B = 1;
    rows.push_back(in);
  }
  const Pass cut = train_pass(m, rows);
  EXPECT_NEAR(whole.loss, cut.loss, 1e-4 * std::fabs(whole.loss));
  for (size_t i = 0; i < whole.grads.size(); ++i) ASSERT_NEAR(whole.grads[i], cut.grads[i], 1e-5f) << i;
  // Starting every slice at row 0 instead gives other masks: the rows matter.
  for (ModelInput& in : rows) in.noise.first_row = 0;
  EXPECT_GT(std::fabs(train_pass(m, rows).loss - whole.loss), 1e-4);
}

// The model's adapter gradient with dropout on (and, as the control, off), against central
// differences of its loss with the same masks (fp32).
TEST(DropoutModel, AdapterGradientsMatchFiniteDifferences) {
  const auto batch = testing::tiny_batch(32);
  for (float dropout : {0.0f, 0.3f}) {
    SCOPED_TRACE("dropout " + std::to_string(dropout));
    auto model = model_with(dropout);
    Transformer& m = *model;
    const ModelInput in = noisy(batch.input(), 5);
    const Pass p = train_pass(m, {in});
    ParamStore& store = m.adapters();
    const std::vector<float> values(store.master_data(), store.master_data() + store.trainable_numel());
    for (size_t i = 0; i < values.size(); i += values.size() / 23) {
      auto loss_at = [&](float v) {
        store.master_data()[i] = v;
        store.sync_compute();
        return m.forward_loss(in).sum;
      };
      const float v0 = values[i], eps = 3e-3f;  // the loss is a sum over tokens: large curvature
      const double numeric = (loss_at(v0 + eps) - loss_at(v0 - eps)) / (double(v0 + eps) - double(v0 - eps));
      loss_at(v0);
      EXPECT_NEAR(p.grads[i], numeric, 2e-3 + 2e-2 * std::fabs(numeric)) << "adapter value " << i;
    }
  }
}

}  // namespace
}  // namespace mt
