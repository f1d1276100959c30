#include <gtest/gtest.h>

#include <limits>

#include "core/error.h"
#include "model/decoder.h"
#include "model/generate.h"
#include "model_fixtures.h"

namespace mt {
namespace {

class DecoderMatchesForward : public ::testing::TestWithParam<bool> {};  // param: LoRA

TEST_P(DecoderMatchesForward, CachedStepsGiveTheFullForwardLogits) {
  LoraConfig lora;
  lora.enabled = GetParam();
  lora.rank = 2;
  lora.targets = {"q", "k", "v", "o", "gate", "up", "down", "lm_head"};
  Transformer m(testing::tiny_config(), Precision::fp32, lora);
  m.init_weights(4);
  testing::randomize(m.base(), 5, 0.3f);
  testing::randomize(m.adapters(), 6, 0.3f);
  auto batch = testing::tiny_batch(32, 9, 1, 10);
  ModelInput in = batch.input();
  std::vector<float> full(size_t(10 * 32));
  m.forward_logits(in, full.data());
  Decoder dec(m, 10);
  // f32 sums in other orders (the decoder's one-row GEMMs against the forward's): 1e-4 relative
  // (1.03e-4 of a logit of 1.59 measured on an AVX2-only CPU, whose f32 GEMM blocks otherwise).
  for (int64_t t = 0; t < 10; ++t) {
    const auto& logits = dec.step(batch.tokens[size_t(t)]);
    for (int64_t v = 0; v < 32; ++v)
      ASSERT_NEAR(logits[size_t(v)], full[size_t(t * 32 + v)], 1e-4 * (1.0 + std::abs(full[size_t(t * 32 + v)])))
          << "t " << t << " v " << v;
  }
  EXPECT_THROW(dec.step(1), Error);  // past max_len
}

INSTANTIATE_TEST_SUITE_P(Generate, DecoderMatchesForward, ::testing::Values(false, true));

TEST(GeneratePick, GreedyTemperatureAndTopP) {
  std::vector<float> logits = {0.0f, 2.0f, 1.0f, 2.0f};
  EXPECT_EQ(pick_token(logits, 0.0f, 1.0f, 0.5), 1);  // argmax, lowest id on ties
  // top_p small: only the most likely token (id 1, tie broken by id) survives.
  for (double u : {0.0, 0.3, 0.99}) EXPECT_EQ(pick_token(logits, 1.0f, 0.01f, u), 1);
  // Full distribution: u spans the ids in probability order 1, 3, 2, 0.
  EXPECT_EQ(pick_token(logits, 1.0f, 1.0f, 0.0), 1);
  EXPECT_EQ(pick_token(logits, 1.0f, 1.0f, 0.999999), 0);
}

// NaN slips past "temperature < 0"; it used to sample nothing and end generation silently.
TEST(GenerateLoop, RefusesNonFiniteSamplingOptions) {
  Transformer m(testing::tiny_config(), Precision::fp32, LoraConfig{});
  m.init_weights(4);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (float t : {nan, inf, -inf, -1.0f}) {
    GenerateOptions o;
    o.temperature = t;
    EXPECT_THROW(generate(m, {1, 2}, o), Error) << "temperature " << t;
  }
  for (float p : {nan, inf, 0.0f, 1.5f}) {
    GenerateOptions o;
    o.temperature = 1.0f;
    o.top_p = p;
    EXPECT_THROW(generate(m, {1, 2}, o), Error) << "top_p " << p;
  }
  GenerateOptions ok;
  ok.temperature = 0.7f, ok.top_p = 0.9f;
  EXPECT_NO_THROW(validate_sampling(ok));
}

TEST(GenerateLoop, StopsAtStopIdAndIsDeterministicBySeed) {
  Transformer m(testing::tiny_config(), Precision::fp32, LoraConfig{});
  m.init_weights(4);
  testing::randomize(m.base(), 5, 0.5f);
  GenerateOptions o;
  o.max_new_tokens = 8;
  o.temperature = 1.0f;
  o.seed = 3;
  auto a = generate(m, {1, 2}, o);
  auto b = generate(m, {1, 2}, o);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.size(), 8u);
  o.stop_ids = {a[2]};
  auto c = generate(m, {1, 2}, o);
  EXPECT_LE(c.size(), 2u);
}

}  // namespace
}  // namespace mt

#include <filesystem>

#include "data/examples.h"
#include "data/tokenizer.h"

namespace mt {
namespace {

TEST(GenerateChatPrompt, MessagesThenAnOpenAssistantHeader) {
  const std::string path =
      std::string(MESHTRAIN_SOURCE_DIR) + "/../shared/data/tokenizers/llama3/tokenizer.model";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "shared data not present";
  auto tok = load_tokenizer(path);
  auto ids = chat_generation_prompt(*tok, {{"user", "Hi"}});
  auto rendered = render_chat(*tok, {{"user", "Hi"}}).tokens;
  ASSERT_GT(ids.size(), rendered.size());
  EXPECT_TRUE(std::equal(rendered.begin(), rendered.end(), ids.begin()));
  std::vector<int32_t> tail(ids.begin() + long(rendered.size()), ids.end());
  std::vector<int32_t> expected = {128006};  // <|start_header_id|>
  for (int32_t id : tok->encode("assistant")) expected.push_back(id);
  expected.push_back(128007);  // <|end_header_id|>
  for (int32_t id : tok->encode("\n\n")) expected.push_back(id);
  EXPECT_EQ(tail, expected);
}

}  // namespace
}  // namespace mt
