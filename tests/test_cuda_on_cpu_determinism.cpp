// The CUDA backend gives the same bits twice, for every op with a reduction, under the emulator's
// thread orders (shuffled afresh at every barrier, so the two runs interleave threads
// differently): what docs/gpu.md promises ("no kernel adds floats with atomics"; fixed trees), and
// what catches a reduction that depends on the order threads arrive in. A whole model's forward
// and backward (every family's parts: biases, q/k norms, windows, LayerNorm and GeLU, GeGLU and
// offset norms) and its AdamW step run twice from the same values; losses, every gradient and the
// updated weights are compared bit for bit. Skipped in builds without MESHTRAIN_CUDA_ON_CPU.
#include <gtest/gtest.h>

#if MESHTRAIN_CUDA_ON_CPU
#include <cstring>
#include <string>
#include <vector>

#include "available_backends.h"
#include "model/transformer.h"
#include "model_fixtures.h"
#include "train/adamw.h"

namespace mt {
namespace {

using testing::family_config;
using testing::tiny_batch;

struct Outcome {
  double loss = 0;
  std::vector<double> norms;  // sum_squares of the first gradients (the clip factor's input)
  std::vector<std::vector<float>> grads, updated;
};

Outcome run_once(const ModelConfig& c, Precision precision, bool lora, Backend& backend) {
  LoraConfig lc;
  lc.enabled = lora, lc.rank = 4, lc.alpha = 8.0f;
  lc.targets = c.model_type == "gpt2" ? std::vector<std::string>{"c_attn", "c_proj", "c_fc", "lm_head"}
                                      : std::vector<std::string>{"q", "k", "v", "o", "gate", "up", "down", "lm_head"};
  Transformer model(c, precision, lc, true, backend);
  for (ParamStore* store : {&model.base(), &model.adapters()})
    for (Param& p : store->params()) {
      std::vector<float> v(size_t(p.numel));
      fill_normal(v.data(), p.numel, 0.3f, 17, p.name);
      if (p.shape.size() == 1)
        for (float& x : v) x += 1.0f;
      store->set_values(p, v.data());
    }
  // Rows of 100 tokens: attention's longer rows take up to four warps, whose sums are combined
  // (with one or two warps an order-dependent combination would have nothing to reorder: a + b is
  // b + a).
  auto batch = tiny_batch(c.vocab_size, 5, 2, 100);
  Outcome o;
  o.loss = model.forward_backward(batch.input(), 0.5f).sum;
  ParamStore& t = model.trainable();
  for (const Param& p : t.params()) {
    std::vector<float> g(size_t(p.numel));
    backend.copy_to_host(g.data(), p.grad_tensor());
    o.grads.push_back(std::move(g));
    // Two are enough (one kernel, 1024 blocks each: slow on the emulator).
    if (o.norms.size() < 2) o.norms.push_back(backend.sum_squares(p.grad_tensor()));
  }
  OptimConfig oc;
  AdamW opt(t, oc);
  opt.step(1e-2f, 0.7f);
  for (const Param& p : t.params()) {
    std::vector<float> v(size_t(p.numel));
    t.get_values(p, v.data());
    o.updated.push_back(std::move(v));
  }
  return o;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class CudaDeterminism : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaDeterminism, ForwardBackwardAndStepRepeatBitForBit) {
  const test::AvailableBackend cuda = test::available_backend("cuda");
  ASSERT_NE(cuda.backend, nullptr) << cuda.why_not;
  ModelConfig c = family_config(GetParam());
  c.max_position_embeddings = 128;
  for (Precision precision : {Precision::fp32, Precision::bf16})
    for (bool lora : {false, true}) {
      const std::string what = GetParam() + (precision == Precision::bf16 ? " bf16" : " fp32") +
                               (lora ? " lora" : " full");
      const Outcome a = run_once(c, precision, lora, *cuda.backend);
      const Outcome b = run_once(c, precision, lora, *cuda.backend);
      EXPECT_EQ(std::memcmp(&a.loss, &b.loss, sizeof a.loss), 0) << what << " loss " << a.loss << " vs " << b.loss;
      ASSERT_EQ(a.grads.size(), b.grads.size());
      for (size_t i = 0; i < a.norms.size(); ++i)
        EXPECT_EQ(std::memcmp(&a.norms[i], &b.norms[i], sizeof(double)), 0) << what << ": sum of squares " << i;
      for (size_t i = 0; i < a.grads.size(); ++i) {
        EXPECT_TRUE(same_bits(a.grads[i], b.grads[i])) << what << ": gradient " << i << " differs";
        EXPECT_TRUE(same_bits(a.updated[i], b.updated[i])) << what << ": updated weight " << i << " differs";
      }
    }
}

INSTANTIATE_TEST_SUITE_P(Families, CudaDeterminism, ::testing::Values("every", "gpt2", "gemma3"));

}  // namespace
}  // namespace mt

#else
TEST(CudaDeterminism, Repeats) { GTEST_SKIP() << "built without MESHTRAIN_CUDA_ON_CPU"; }
#endif
