// Tensor parallelism's single-process pieces: the vocabulary-parallel cross-entropy split over
// several "ranks" (columns of the logits, reductions done by hand) equals the whole-vocabulary
// kernel, and a tp rank's config holds whole heads.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "parallel/tensor_parallel.h"
#include "finite_diff.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/cross_entropy_vocab_parallel.h"
#include "model_fixtures.h"

namespace mt {
namespace {

TEST(TensorParallel, VocabParallelCrossEntropyEqualsWholeVocabulary) {
  const int64_t N = 5, V = 48;
  std::vector<float> logits = test::random_normal(size_t(N * V), 11, 3.0f);
  std::vector<int32_t> targets = {3, 47, -1, 24, 0};  // one ignored row, targets on every part
  std::vector<float> whole_losses(N), whole_grad = logits;
  const double whole = cross_entropy_forward_backward<float>(whole_losses.data(), whole_grad.data(),
                                                             whole_grad.data(), targets.data(), N, V, 0.25f);
  for (int64_t parts : {2, 3, 4}) {
    const int64_t Vp = V / parts;
    // Each part's columns, contiguous, as a tp rank holds them.
    std::vector<std::vector<float>> local(size_t(parts), std::vector<float>(size_t(N * Vp)));
    for (int64_t p = 0; p < parts; ++p)
      for (int64_t n = 0; n < N; ++n)
        std::copy_n(&logits[size_t(n * V + p * Vp)], Vp, &local[size_t(p)][size_t(n * Vp)]);
    std::vector<float> m(static_cast<size_t>(N), -1e30f), sums(static_cast<size_t>(2 * N), 0.0f);
    std::vector<float> part_m(static_cast<size_t>(N)), part_s(static_cast<size_t>(2 * N));
    for (int64_t p = 0; p < parts; ++p) {
      vp_ce_row_max(part_m.data(), local[size_t(p)].data(), targets.data(), N, Vp);
      for (int64_t n = 0; n < N; ++n) m[size_t(n)] = std::max(m[size_t(n)], part_m[size_t(n)]);  // "max over ranks"
    }
    for (int64_t p = 0; p < parts; ++p) {
      vp_ce_row_sums(part_s.data(), local[size_t(p)].data(), targets.data(), m.data(), N, Vp, p * Vp);
      for (int64_t i = 0; i < 2 * N; ++i) sums[size_t(i)] += part_s[size_t(i)];  // "sum over ranks"
    }
    for (int64_t p = 0; p < parts; ++p) {
      std::vector<float> losses(static_cast<size_t>(N));
      const double total = vp_ce_finish(losses.data(), local[size_t(p)].data(), local[size_t(p)].data(),
                                        targets.data(), m.data(), sums.data(), N, Vp, p * Vp, 0.25f);
      EXPECT_NEAR(total, whole, 1e-5 * whole) << parts << " parts, part " << p;
      for (int64_t n = 0; n < N; ++n) {
        EXPECT_NEAR(losses[size_t(n)], whole_losses[size_t(n)], 1e-5f) << "row " << n;
        for (int64_t v = 0; v < Vp; ++v)
          EXPECT_NEAR(local[size_t(p)][size_t(n * Vp + v)], whole_grad[size_t(n * V + p * Vp + v)], 1e-7f)
              << "row " << n << " column " << p * Vp + v;
      }
    }
  }
}

TEST(TensorParallel, RankConfigHoldsWholeHeads) {
  ModelConfig full = testing::tiny_config();  // hidden 16, 4 heads of 4, 2 KV heads, I 24, V 32
  ModelConfig local = parallel::tensor_parallel_config(full, 2);
  EXPECT_EQ(local.hidden_size, 16);
  EXPECT_EQ(local.head_dim(), 4);
  EXPECT_EQ(local.num_attention_heads, 2);
  EXPECT_EQ(local.num_key_value_heads, 1);
  EXPECT_EQ(local.q_dim(), 8);
  EXPECT_EQ(local.kv_dim(), 4);
  EXPECT_EQ(local.intermediate_size, 12);
  EXPECT_EQ(local.vocab_size, 16);
  EXPECT_EQ(parallel::tensor_parallel_config(full, 1).q_dim(), 16);
  try {
    parallel::tensor_parallel_config(full, 4);
    FAIL() << "4 ranks cannot split 2 KV heads";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "tensor parallelism: model.num_key_value_heads (2) is not divisible by tp=4");
  }
}

}  // namespace
}  // namespace mt
