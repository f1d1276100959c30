#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/bf16.h"
#include "core/error.h"
#include "finite_diff.h"
#include "kernels/cpu/cross_entropy.h"

namespace mt {
namespace {

using test::random_normal;

// Naive log-softmax in double.
std::vector<double> naive_log_softmax(const std::vector<float>& x, int64_t n, int64_t V) {
  double m = x[n * V];
  for (int64_t v = 0; v < V; ++v) m = std::max(m, double(x[n * V + v]));
  double s = 0;
  for (int64_t v = 0; v < V; ++v) s += std::exp(x[n * V + v] - m);
  std::vector<double> out(V);
  for (int64_t v = 0; v < V; ++v) out[v] = x[n * V + v] - m - std::log(s);
  return out;
}

TEST(OpsCrossEntropy, ForwardBackwardMatchNaiveLogSoftmax) {
  const int64_t N = 4, V = 37;
  std::vector<float> x = random_normal(N * V, 1, 3.0f);
  x[2 * V + 5] = 1000.0f;  // a naive exp would overflow
  std::vector<int32_t> t = {3, -1, 5, 36};
  const float scale = 0.25f;
  std::vector<float> losses(N, -1.0f), d(N * V, 9.0f);
  const double total =
      cross_entropy_forward_backward(losses.data(), d.data(), x.data(), t.data(), N, V, scale);
  double ref_total = 0;
  for (int64_t n = 0; n < N; ++n) {
    if (t[n] < 0) {
      EXPECT_EQ(losses[n], 0.0f);
      for (int64_t v = 0; v < V; ++v) EXPECT_EQ(d[n * V + v], 0.0f);
      continue;
    }
    std::vector<double> ls = naive_log_softmax(x, n, V);
    EXPECT_NEAR(losses[n], -ls[t[n]], 1e-5 * (1 + std::fabs(ls[t[n]])));
    ref_total += -ls[t[n]];
    for (int64_t v = 0; v < V; ++v) {
      const double g = (std::exp(ls[v]) - (v == t[n])) * scale;
      EXPECT_NEAR(d[n * V + v], g, 1e-6) << n << " " << v;
    }
  }
  EXPECT_NEAR(total, ref_total, 1e-5 * ref_total);
}

TEST(OpsCrossEntropy, BackwardMatchesFiniteDifferences) {
  const int64_t N = 3, V = 7;
  std::vector<float> x = random_normal(N * V, 2);
  std::vector<int32_t> t = {6, -1, 0};  // the middle row is ignored
  const float scale = 0.5f;
  auto loss = [&](const std::vector<float>& xx) {
    std::vector<float> losses(N);
    return scale * cross_entropy_forward_backward<float>(losses.data(), nullptr, xx.data(),
                                                         t.data(), N, V, scale);
  };
  std::vector<float> losses(N), d(N * V);
  cross_entropy_forward_backward(losses.data(), d.data(), x.data(), t.data(), N, V, scale);
  EXPECT_EQ(losses[1], 0.0f);
  test::expect_grad_near(d, test::central_diff(loss, x), "dlogits");
  for (int64_t v = 0; v < V; ++v) EXPECT_EQ(d[V + v], 0.0f);  // exactly, not just nearly
}

TEST(OpsCrossEntropy, InPlaceAndLossOnlyMatchOutOfPlace) {
  const int64_t N = 8, V = 1000;
  std::vector<float> x = random_normal(N * V, 3, 2.0f);
  std::vector<int32_t> t = {0, 999, -5, 17, 500, 3, -1, 998};
  std::vector<float> l1(N), l2(N), l3(N), d(N * V);
  const double s1 = cross_entropy_forward_backward(l1.data(), d.data(), x.data(), t.data(), N, V, 1.0f);
  const double s3 = cross_entropy_forward_backward<float>(l3.data(), nullptr, x.data(), t.data(), N, V, 1.0f);
  std::vector<float> y = x;
  const double s2 = cross_entropy_forward_backward(l2.data(), y.data(), y.data(), t.data(), N, V, 1.0f);
  EXPECT_EQ(s1, s2);
  EXPECT_EQ(s1, s3);
  EXPECT_EQ(l1, l2);
  EXPECT_EQ(l1, l3);
  EXPECT_EQ(d, y);
}

TEST(OpsCrossEntropy, TargetOutOfRangeIsABug) {
  const int64_t N = 2, V = 5;
  std::vector<float> x(N * V, 0.0f), losses(N);
  std::vector<int32_t> t = {1, 5};
  EXPECT_THROW(cross_entropy_forward_backward(losses.data(), x.data(), x.data(), t.data(), N, V, 1.0f),
               Error);
}

TEST(OpsCrossEntropy, Bf16MatchesF32) {
  const int64_t N = 16, V = 32000;  // threaded size
  std::vector<float> x = random_normal(N * V, 4, 3.0f);
  std::vector<bf16> xb(x.size());
  convert(xb.data(), x.data(), x.size());
  convert(x.data(), xb.data(), x.size());  // same logits for both
  std::vector<int32_t> t(N);
  for (int64_t n = 0; n < N; ++n) t[n] = n == 3 ? -1 : int32_t((n * 7777) % V);
  const float scale = 1.0f / N;
  std::vector<float> lf(N), lb(N), df(N * V);
  const double sf = cross_entropy_forward_backward(lf.data(), df.data(), x.data(), t.data(), N, V, scale);
  const double sb = cross_entropy_forward_backward(lb.data(), xb.data(), xb.data(), t.data(), N, V, scale);
  EXPECT_NEAR(sb, sf, 1e-6 * sf);  // the math is f32 either way: only the stored gradient rounds
  for (int64_t i = 0; i < N * V; ++i)
    ASSERT_NEAR(to_float(xb[i]), df[i], 1e-2 * std::fabs(df[i]) + 1e-12) << i;
}

// Each row is computed by one thread start to end, and the total is summed serially, so the
// results are the same bits run to run and for any thread count.
TEST(OpsCrossEntropy, IsDeterministic) {
  const int64_t N = 64, V = 32000;
  std::vector<bf16> x(N * V);
  {
    std::vector<float> xf = random_normal(N * V, 5, 4.0f);
    convert(x.data(), xf.data(), xf.size());
  }
  std::vector<int32_t> t(N);
  for (int64_t n = 0; n < N; ++n) t[n] = int32_t((n * 4099) % V);
  auto run = [&](std::vector<float>& losses, std::vector<bf16>& d) {
    losses.assign(N, 0.0f);
    d.assign(N * V, bf16{});
    return cross_entropy_forward_backward(losses.data(), d.data(), x.data(), t.data(), N, V,
                                          1.0f / N);
  };
  std::vector<float> l0;
  std::vector<bf16> d0;
  const double s0 = run(l0, d0);
  const int saved = omp_get_max_threads();
  for (int threads : {saved, 1, 3}) {
    omp_set_num_threads(threads);
    std::vector<float> l;
    std::vector<bf16> d;
    const double s = run(l, d);
    EXPECT_EQ(std::memcmp(&s, &s0, sizeof s), 0) << threads << " threads";
    EXPECT_EQ(l, l0) << threads << " threads";
    EXPECT_EQ(0, std::memcmp(d.data(), d0.data(), d.size() * sizeof(bf16))) << threads << " threads";
  }
  omp_set_num_threads(saved);
}

}  // namespace
}  // namespace mt
