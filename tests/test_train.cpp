// End-to-end training: it learns, it is deterministic, accumulation equals one big batch.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <sstream>

#include "data/text_dataset.h"
#include "model_fixtures.h"
#include "train/trainer.h"
#include "temp_dirs.h"

namespace mt {
namespace {

RunConfig small_run(const std::string& name) {
  RunConfig cfg = parse_run_config(default_run_config_toml(), {}, "<test>");
  cfg.train.steps = 120;
  cfg.train.seq_len = 64;
  cfg.train.batch_size = 8;
  cfg.train.log_every = 40;
  cfg.train.peak_gflops = 100.0f;  // skip the GEMM measurement
  cfg.optim.warmup_steps = 10;
  cfg.output.dir = testing::fresh_temp_dir(name) + "/run";
  cfg.output.overwrite = true;  // a test may train several times into one directory
  return cfg;
}

double unigram_entropy_nats(const std::vector<int32_t>& tokens) {
  std::map<int32_t, double> counts;
  for (int32_t t : tokens) counts[t] += 1.0;
  double h = 0.0;
  for (auto& [t, c] : counts) {
    double p = c / double(tokens.size());
    h -= p * std::log(p);
  }
  return h;
}

TEST(TrainEndToEnd, LossFallsWellBelowTheUnigramEntropy) {
  RunConfig cfg = small_run("train_learns");
  std::ostringstream log;
  TrainSummary s = train(cfg, log);
  TextDataset data("", cfg.data.val_fraction, cfg.train.seq_len);
  double h = unigram_entropy_nats(data.train_tokens());
  // A model that learned only byte frequencies would sit at h; context must take it well below.
  EXPECT_LT(s.val_loss_after, 0.75 * h) << "unigram entropy " << h << "\n" << log.str();
  EXPECT_LT(s.losses.back(), 0.75 * h);
  EXPECT_GT(s.val_loss_before, h);  // an untrained model knows less than the unigram statistics
  for (const auto& f : s.files_written) EXPECT_TRUE(std::filesystem::exists(f)) << f;
}

TEST(TrainEndToEnd, SameSeedGivesBitIdenticalLosses) {
  for (bool lora : {false, true}) {
    RunConfig cfg = small_run("train_determinism");
    cfg.train.steps = 6;
    cfg.train.grad_accum = 2;
    cfg.lora.enabled = lora;
    std::ostringstream log1, log2;
    auto a = train(cfg, log1).losses;
    auto b = train(cfg, log2).losses;
    ASSERT_EQ(a.size(), 6u);
    for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << "lora=" << lora << " step " << i;
    cfg.train.seed += 1;
    std::ostringstream log3;
    EXPECT_NE(train(cfg, log3).losses, a) << "a different seed must give a different run";
  }
}

TEST(TrainEndToEnd, GradientAccumulationEqualsOneBigBatch) {
  // Same tokens as one batch of 4 rows, or as two micro-batches of 2 rows scaled by the total
  // count: the gradients agree (up to float summation order).
  Transformer m(testing::tiny_config(), Precision::fp32, LoraConfig{});
  m.init_weights(3);
  auto batch = testing::tiny_batch(32, 5, 4, 6);
  const float scale = 1.0f / float(4 * 6 - 1);
  m.base().zero_grad();
  m.forward_backward(batch.input(), scale);
  std::vector<float> whole(m.base().grad_data(), m.base().grad_data() + m.base().trainable_numel());
  m.base().zero_grad();
  for (int half = 0; half < 2; ++half) {
    ModelInput in = batch.input();
    in.B = 2;
    in.tokens += half * 12, in.targets += half * 12;
    m.forward_backward(in, scale);
  }
  const float* acc = m.base().grad_data();
  for (size_t i = 0; i < whole.size(); ++i)
    ASSERT_NEAR(acc[i], whole[i], 1e-6 + 1e-4 * std::abs(whole[i])) << i;
}

}  // namespace
}  // namespace mt
