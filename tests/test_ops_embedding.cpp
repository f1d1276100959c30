#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>
#include <vector>

#include "finite_diff.h"
#include "kernels/cpu/embedding.h"

namespace mt {
namespace {

using test::random_normal;

TEST(OpsEmbedding, ForwardGathersRows) {
  const int64_t V = 5, C = 3;
  std::vector<float> table = random_normal(V * C, 1);
  std::vector<int32_t> tokens = {4, 0, 4, 2};
  std::vector<float> out(tokens.size() * C);
  embedding_forward(out.data(), tokens.data(), table.data(), int64_t(tokens.size()), C);
  for (size_t n = 0; n < tokens.size(); ++n)
    for (int64_t c = 0; c < C; ++c) EXPECT_EQ(out[n * C + c], table[tokens[n] * C + c]);
}

TEST(OpsEmbedding, BackwardMatchesFiniteDifferences) {
  const int64_t V = 5, C = 4, N = 7;
  std::vector<int32_t> tokens = {1, 3, 1, 0, 4, 1, 3};  // repeats must accumulate
  std::vector<float> table = random_normal(V * C, 2), R = random_normal(N * C, 3);
  auto loss = [&](const std::vector<float>& t) {
    std::vector<float> out(N * C);
    embedding_forward(out.data(), tokens.data(), t.data(), N, C);
    return test::projection(out, R);
  };
  std::vector<float> dtable(V * C, 0.5f);  // backward accumulates into what is there
  embedding_backward(dtable.data(), tokens.data(), R.data(), N, C);
  for (auto& g : dtable) g -= 0.5f;
  test::expect_grad_near(dtable, test::central_diff(loss, table), "dtable");
}

// Column ownership makes every element a sum in token order, like the serial loop below, so
// the result is the same bits whatever the thread count, and run to run.
TEST(OpsEmbedding, BackwardIsDeterministic) {
  const int64_t V = 37, C = 768, N = 2048;  // large enough to run threaded
  std::vector<int32_t> tokens(N);
  for (int64_t n = 0; n < N; ++n) tokens[n] = int32_t((n * 7919) % V);
  std::vector<float> dout = random_normal(N * C, 4);
  std::vector<float> ref(V * C, 0.0f);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) ref[tokens[n] * C + c] += dout[n * C + c];

  const int saved = omp_get_max_threads();
  for (int threads : {saved, saved, 1, 3}) {
    omp_set_num_threads(threads);
    std::vector<float> dtable(V * C, 0.0f);
    embedding_backward(dtable.data(), tokens.data(), dout.data(), N, C);
    EXPECT_EQ(0, std::memcmp(dtable.data(), ref.data(), ref.size() * sizeof(float)))
        << threads << " threads";
  }
  omp_set_num_threads(saved);
}

}  // namespace
}  // namespace mt
