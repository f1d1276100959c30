// The online-softmax merge (kernels/device_math/online_softmax.h), the device math of decode
// attention, run on the CPU: attention over a KV cache computed key by key and chunk by chunk,
// the chunks' states merged in two different orders, equals the one-pass softmax of
// kernels/reference's decode attention.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "kernels/device_math/online_softmax.h"
#include "kernels/reference/attention.h"
#include "finite_diff.h"

namespace mt {
namespace {

using Vec = std::vector<float>;

// A partial result: the softmax state of some keys and its unnormalised weighted sum of values.
struct Partial {
  SoftmaxState s;
  Vec acc;
};

Partial merged(const Partial& a, const Partial& b) {
  const SoftmaxMerge m = merge_softmax(a.s, b.s);
  Partial r{m.state, Vec(a.acc.size())};
  for (size_t e = 0; e < r.acc.size(); ++e) r.acc[e] = a.acc[e] * m.scale_a + b.acc[e] * m.scale_b;
  return r;
}

// Keys [j0, j1) of one query head, one key at a time (as one warp of the kernel runs them).
Partial chunk(const float* q, const Vec& k, const Vec& v, int64_t row, int64_t D, int64_t j0,
              int64_t j1) {
  Partial p{{}, Vec(size_t(D), 0.0f)};
  for (int64_t j = j0; j < j1; ++j) {
    float score = 0.0f;
    for (int64_t e = 0; e < D; ++e) score += q[e] * k[size_t(j * row + e)];
    score /= std::sqrt(float(D));
    const SoftmaxMerge m = add_score(p.s, score);
    p.s = m.state;
    for (int64_t e = 0; e < D; ++e)
      p.acc[size_t(e)] = p.acc[size_t(e)] * m.scale_a + v[size_t(j * row + e)] * m.scale_b;
  }
  return p;
}

TEST(OnlineSoftmax, MergedChunksEqualOnePassSoftmax) {
  const int64_t Hq = 1, Hkv = 1, D = 7, len = 23;
  const Vec q = test::random_normal(size_t(D), 1, 2.0f);
  const Vec k = test::random_normal(size_t(len * D), 2, 2.0f), v = test::random_normal(size_t(len * D), 3);
  Vec expected(size_t(D), 0.0f), qc = q, kc = k, vc = v;
  const Device host{DeviceKind::reference, 0};
  ref::decode_attention({expected.data(), DType::f32, 1, D, host}, {qc.data(), DType::f32, 1, D, host},
                        {kc.data(), DType::f32, len, D, host}, {vc.data(), DType::f32, len, D, host},
                        len, Hq, Hkv);
  // Uneven chunks, one of them empty; merged left to right and as a tree.
  const int64_t cuts[] = {0, 5, 6, 6, 15, 23};
  std::vector<Partial> parts;
  for (size_t c = 0; c + 1 < std::size(cuts); ++c)
    parts.push_back(chunk(q.data(), k, v, D, D, cuts[c], cuts[c + 1]));
  Partial left = parts[0];
  for (size_t c = 1; c < parts.size(); ++c) left = merged(left, parts[c]);
  const Partial tree = merged(merged(parts[0], parts[1]), merged(merged(parts[2], parts[3]), parts[4]));
  const Partial one = chunk(q.data(), k, v, D, D, 0, len);
  double lse = 0.0, mx = -INFINITY;  // log-sum-exp of the scores, in double
  std::vector<double> scores;
  for (int64_t j = 0; j < len; ++j) {
    double s = 0.0;
    for (int64_t e = 0; e < D; ++e) s += double(q[size_t(e)]) * k[size_t(j * D + e)];
    scores.push_back(s / std::sqrt(double(D)));
    mx = std::max(mx, scores.back());
  }
  for (double s : scores) lse += std::exp(s - mx);
  lse = mx + std::log(lse);
  const std::pair<const Partial*, const char*> results[] = {
      {&left, "left to right"}, {&tree, "tree"}, {&one, "one chunk"}};
  for (const auto& [p, what] : results) {
    for (int64_t e = 0; e < D; ++e)
      EXPECT_NEAR(p->acc[size_t(e)] / p->s.sum, expected[size_t(e)], 1e-5) << what << " [" << e << "]";
    EXPECT_NEAR(log_sum_exp(p->s), lse, 1e-5) << what;
  }
}

TEST(OnlineSoftmax, EmptyStatesMergeWithoutNaN) {
  const SoftmaxMerge both = merge_softmax({}, {});
  EXPECT_EQ(both.state.max, -INFINITY);
  EXPECT_EQ(both.state.sum, 0.0f);
  EXPECT_EQ(both.scale_a, 0.0f);
  EXPECT_EQ(both.scale_b, 0.0f);
  const SoftmaxMerge one = merge_softmax({}, {3.0f, 2.0f});  // an empty side changes nothing
  EXPECT_EQ(one.state.max, 3.0f);
  EXPECT_EQ(one.state.sum, 2.0f);
  EXPECT_EQ(one.scale_a, 0.0f);
  EXPECT_EQ(one.scale_b, 1.0f);
  // A score far above the running maximum rescales the old sum to nothing, not to inf or NaN.
  const SoftmaxMerge big = add_score({-50.0f, 4.0f}, 80.0f);
  EXPECT_EQ(big.state.max, 80.0f);
  EXPECT_FLOAT_EQ(big.state.sum, 1.0f);
  EXPECT_EQ(big.scale_b, 1.0f);
}

}  // namespace
}  // namespace mt
