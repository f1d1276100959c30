// Tests of the tiled causal GQA attention against a naive double-precision reference (full
// softmax with the causal/segment mask, analytic gradient) and against finite differences.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/bf16.h"
#include "finite_diff.h"
#include "kernels/cpu/attention.h"

namespace mt {
namespace {

using Vec = std::vector<float>;

struct Case {
  AttentionShape s;
  std::vector<int32_t> seg;  // empty: no segments
  const int32_t* segp() const { return seg.empty() ? nullptr : seg.data(); }
  size_t nq() const { return size_t(s.B * s.T * s.Hq * s.D); }
  size_t nk() const { return size_t(s.B * s.T * s.Hkv * s.D); }
};

Vec randn(size_t n, uint32_t seed, float sd = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, sd);
  Vec v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

// Two packed documents per row: tokens [0, cut) are document 0, the rest document 1.
std::vector<int32_t> two_docs(int64_t B, int64_t T, int64_t cut) {
  std::vector<int32_t> seg(size_t(B * T));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) seg[size_t(b * T + t)] = t < cut ? 0 : 1;
  return seg;
}

// Naive attention in double: out, lse, and (when dout is given) dq, dk, dv.
struct Ref {
  std::vector<double> out, lse, dq, dk, dv;
};
Ref reference(const Case& c, const Vec& q, const Vec& k, const Vec& v, const Vec* dout) {
  const auto& s = c.s;
  const int64_t nrep = s.Hq / s.Hkv;
  const double scale = 1.0 / std::sqrt(double(s.D));
  auto qi = [&](int64_t b, int64_t t, int64_t h) { return size_t(((b * s.T + t) * s.Hq + h) * s.D); };
  auto ki = [&](int64_t b, int64_t t, int64_t h) { return size_t(((b * s.T + t) * s.Hkv + h) * s.D); };
  Ref r;
  r.out.assign(c.nq(), 0), r.lse.assign(size_t(s.B * s.Hq * s.T), 0);
  r.dq.assign(c.nq(), 0), r.dk.assign(c.nk(), 0), r.dv.assign(c.nk(), 0);
  std::vector<double> p(size_t(s.T)), dp(size_t(s.T));
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.Hq; ++h)
      for (int64_t i = 0; i < s.T; ++i) {
        const int64_t g = h / nrep;
        double mx = -INFINITY;
        for (int64_t j = 0; j <= i; ++j) {
          p[j] = -INFINITY;
          if (!c.seg.empty() && c.seg[b * s.T + j] != c.seg[b * s.T + i]) continue;
          if (s.window > 0 && i - j >= s.window) continue;
          double d = 0;
          for (int64_t e = 0; e < s.D; ++e) d += double(q[qi(b, i, h) + e]) * k[ki(b, j, g) + e];
          p[j] = d * scale;
          mx = std::max(mx, p[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j <= i; ++j) sum += (p[j] = std::exp(p[j] - mx));
        r.lse[size_t((b * s.Hq + h) * s.T + i)] = mx + std::log(sum);
        for (int64_t j = 0; j <= i; ++j) {
          p[j] /= sum;
          for (int64_t e = 0; e < s.D; ++e) r.out[qi(b, i, h) + e] += p[j] * v[ki(b, j, g) + e];
        }
        if (!dout) continue;
        double dd = 0;
        for (int64_t j = 0; j <= i; ++j) {
          dp[j] = 0;
          for (int64_t e = 0; e < s.D; ++e) dp[j] += double((*dout)[qi(b, i, h) + e]) * v[ki(b, j, g) + e];
          dd += p[j] * dp[j];
        }
        for (int64_t j = 0; j <= i; ++j) {
          const double ds = p[j] * (dp[j] - dd) * scale;
          for (int64_t e = 0; e < s.D; ++e) {
            r.dq[qi(b, i, h) + e] += ds * k[ki(b, j, g) + e];
            r.dk[ki(b, j, g) + e] += ds * q[qi(b, i, h) + e];
            r.dv[ki(b, j, g) + e] += p[j] * (*dout)[qi(b, i, h) + e];
          }
        }
      }
  return r;
}

// Kernel results in f32.
struct Got {
  Vec out, lse, dq, dk, dv;
};
Got run_f32(const Case& c, const Vec& q, const Vec& k, const Vec& v, const Vec* dout) {
  Got g;
  g.out.assign(c.nq(), NAN), g.lse.assign(size_t(c.s.B * c.s.Hq * c.s.T), NAN);
  attention_forward(g.out.data(), g.lse.data(), q.data(), k.data(), v.data(), c.segp(), c.s);
  if (dout) {
    // Filled with NaN: the kernel must overwrite every element.
    g.dq.assign(c.nq(), NAN), g.dk.assign(c.nk(), NAN), g.dv.assign(c.nk(), NAN);
    attention_backward(g.dq.data(), g.dk.data(), g.dv.data(), dout->data(), g.out.data(),
                       g.lse.data(), q.data(), k.data(), v.data(), c.segp(), c.s);
  }
  return g;
}

void expect_near(const Vec& got, const std::vector<double>& want, double tol, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(got[i] - want[i]) <= tol * (1.0 + std::abs(want[i]))) && ++bad <= 5)
      ADD_FAILURE() << what << "[" << i << "] got " << got[i] << " want " << want[i];
  EXPECT_EQ(bad, 0) << what;
}

void check_against_reference(const Case& c, bool backward, double tol_fwd, double tol_bwd) {
  const Vec q = randn(c.nq(), 1), k = randn(c.nk(), 2), v = randn(c.nk(), 3);
  const Vec dout = randn(c.nq(), 4);
  const Ref r = reference(c, q, k, v, backward ? &dout : nullptr);
  const Got g = run_f32(c, q, k, v, backward ? &dout : nullptr);
  expect_near(g.out, r.out, tol_fwd, "out");
  expect_near(g.lse, r.lse, tol_fwd, "lse");
  if (!backward) return;
  expect_near(g.dq, r.dq, tol_bwd, "dq");
  expect_near(g.dk, r.dk, tol_bwd, "dk");
  expect_near(g.dv, r.dv, tol_bwd, "dv");
}

TEST(OpsAttentionForward, MatchesReferenceAcrossShapes) {
  // {B, T, Hq, Hkv, D}: tiny, T not a multiple of the 64-row tile, GQA and MHA, D = 4, 8, 24, 64,
  // and a single token.
  const AttentionShape shapes[] = {{2, 7, 4, 2, 4},   {1, 150, 4, 2, 8},  {2, 130, 4, 4, 64},
                                   {1, 64, 2, 1, 64}, {1, 200, 6, 2, 24}, {2, 65, 4, 2, 64},
                                   {1, 1, 1, 1, 4}};
  for (const auto& s : shapes) {
    SCOPED_TRACE(testing::Message() << "B=" << s.B << " T=" << s.T << " Hq=" << s.Hq
                                    << " Hkv=" << s.Hkv << " D=" << s.D);
    check_against_reference(Case{s, {}}, false, 2e-5, 0);
  }
}

TEST(OpsAttentionForward, SegmentsMatchReference) {
  check_against_reference(Case{{2, 150, 4, 2, 8}, two_docs(2, 150, 90)}, false, 2e-5, 0);
  check_against_reference(Case{{1, 200, 4, 4, 64}, two_docs(1, 200, 64)}, false, 2e-5, 0);
}

TEST(OpsAttentionForward, SegmentsIsolateDocuments) {
  // Changing the first document's keys and values must not move the second document's output.
  const Case c{{2, 150, 4, 2, 16}, two_docs(2, 150, 70)};
  const Vec q = randn(c.nq(), 1), k = randn(c.nk(), 2), v = randn(c.nk(), 3);
  Vec k2 = k, v2 = v;
  for (int64_t b = 0; b < c.s.B; ++b)
    for (int64_t t = 0; t < 70; ++t)
      for (int64_t e = 0; e < c.s.Hkv * c.s.D; ++e) {
        k2[size_t((b * c.s.T + t) * c.s.Hkv * c.s.D + e)] += 3.0f;
        v2[size_t((b * c.s.T + t) * c.s.Hkv * c.s.D + e)] -= 5.0f;
      }
  const Got a = run_f32(c, q, k, v, nullptr), b = run_f32(c, q, k2, v2, nullptr);
  const size_t row = size_t(c.s.Hq * c.s.D);
  for (int64_t bb = 0; bb < c.s.B; ++bb)
    for (int64_t t = 0; t < c.s.T; ++t) {
      const size_t o = size_t(bb * c.s.T + t) * row;
      const bool same = std::memcmp(&a.out[o], &b.out[o], row * sizeof(float)) == 0;
      EXPECT_EQ(same, t >= 70) << "b=" << bb << " t=" << t;
    }
}

TEST(OpsAttentionBackward, FiniteDifferencesTiny) {
  // Plain causal, two documents, and a sliding window of 3 (with and without documents).
  const Case cases[] = {{{2, 7, 4, 2, 4}, {}},
                        {{2, 7, 4, 2, 4}, two_docs(2, 7, 3)},
                        {{2, 7, 4, 2, 4, 3}, {}},
                        {{2, 7, 4, 2, 4, 3}, two_docs(2, 7, 3)}};
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << (c.seg.empty() ? "no segments" : "segments") << ", window "
                                    << c.s.window);
    Vec q = randn(c.nq(), 11), k = randn(c.nk(), 12), v = randn(c.nk(), 13);
    const Vec R = randn(c.nq(), 14);
    const Got g = run_f32(c, q, k, v, &R);  // dL/dout = R for L = sum(out * R)
    auto loss = [&]() {
      const Got f = run_f32(c, q, k, v, nullptr);
      double L = 0;
      for (size_t i = 0; i < f.out.size(); ++i) L += double(f.out[i]) * R[i];
      return L;
    };
    test::expect_grad_matches_nudges(q, g.dq, loss, "dq");
    test::expect_grad_matches_nudges(k, g.dk, loss, "dk");
    test::expect_grad_matches_nudges(v, g.dv, loss, "dv");
  }
}

TEST(OpsAttentionBackward, MatchesReferenceGradient) {
  // T = 150: three tiles, the last partial; GQA with 2 query heads per KV head.
  check_against_reference(Case{{2, 150, 4, 2, 64}, {}}, true, 2e-5, 1e-4);
  check_against_reference(Case{{1, 150, 4, 4, 8}, {}}, true, 2e-5, 1e-4);
  check_against_reference(Case{{2, 150, 4, 2, 24}, two_docs(2, 150, 100)}, true, 2e-5, 1e-4);
}

TEST(OpsAttentionBackward, KeyChunksMatchReference) {
  // One (b, KV head) pair and 4 threads: the backward splits keys into chunks with separate dQ
  // partials. Must agree with the reference whatever the thread count.
  const int saved = omp_get_max_threads();
  for (int threads : {1, 3, 4}) {
    SCOPED_TRACE(testing::Message() << threads << " threads");
    omp_set_num_threads(threads);
    check_against_reference(Case{{1, 200, 3, 1, 16}, {}}, true, 2e-5, 1e-4);
  }
  omp_set_num_threads(saved);
}

TEST(OpsAttentionWindow, MatchesReference) {
  // {B, T, Hq, Hkv, D, window}: windows narrower than a 64-key tile (whole tiles skipped), wider
  // than one, a single key, and a window with packed documents.
  check_against_reference(Case{{2, 150, 4, 2, 8, 40}, {}}, true, 2e-5, 1e-4);
  check_against_reference(Case{{1, 200, 4, 1, 16, 70}, {}}, true, 2e-5, 1e-4);
  check_against_reference(Case{{2, 150, 4, 2, 24, 1}, {}}, true, 2e-5, 1e-4);
  check_against_reference(Case{{2, 150, 4, 2, 24, 50}, two_docs(2, 150, 100)}, true, 2e-5, 1e-4);
  // A window longer than the row is no window at all.
  check_against_reference(Case{{1, 90, 2, 1, 8, 1000}, {}}, true, 2e-5, 1e-4);
}

TEST(OpsAttentionWindow, KeysBeforeTheWindowDoNotMatter) {
  // Keys and values of the first tile (positions 0..63) changed: queries from 63 + 40 on do not
  // see any of them through a window of 40, and their outputs must not move by a bit (their
  // tiles over the first keys are skipped, not merely masked to zero weight).
  const Case c{{1, 200, 4, 2, 16, 40}, {}};
  const Vec q = randn(c.nq(), 5), k = randn(c.nk(), 6), v = randn(c.nk(), 7);
  Vec k2 = k, v2 = v;
  for (size_t i = 0; i < size_t(64 * c.s.Hkv * c.s.D); ++i) k2[i] += 2.0f, v2[i] -= 3.0f;
  const Got a = run_f32(c, q, k, v, nullptr), b = run_f32(c, q, k2, v2, nullptr);
  const size_t row = size_t(c.s.Hq * c.s.D);
  for (int64_t t = 0; t < c.s.T; ++t) {
    const bool same = std::memcmp(&a.out[size_t(t) * row], &b.out[size_t(t) * row], row * 4) == 0;
    EXPECT_EQ(same, t >= 63 + 40) << "t=" << t;
  }
}

TEST(OpsAttentionBf16, AgreesWithF32) {
  const Case c{{2, 150, 4, 2, 64}, two_docs(2, 150, 80)};
  Vec q = randn(c.nq(), 21), k = randn(c.nk(), 22), v = randn(c.nk(), 23), dout = randn(c.nq(), 24);
  // Round the inputs to bf16 first, so both runs see the same values.
  std::vector<bf16> qb(q.size()), kb(k.size()), vb(v.size()), db(dout.size());
  auto round = [](Vec& x, std::vector<bf16>& xb) {
    for (size_t i = 0; i < x.size(); ++i) x[i] = to_float(xb[i] = from_float<bf16>(x[i]));
  };
  round(q, qb), round(k, kb), round(v, vb), round(dout, db);
  const Got f = run_f32(c, q, k, v, &dout);

  std::vector<bf16> out(c.nq()), dq(c.nq()), dk(c.nk()), dv(c.nk());
  Vec lse(size_t(c.s.B * c.s.Hq * c.s.T));
  attention_forward(out.data(), lse.data(), qb.data(), kb.data(), vb.data(), c.segp(), c.s);
  attention_backward(dq.data(), dk.data(), dv.data(), db.data(), out.data(), lse.data(), qb.data(),
                     kb.data(), vb.data(), c.segp(), c.s);
  auto cmp = [](const std::vector<bf16>& got, const Vec& want, double tol, const char* what) {
    int bad = 0;
    for (size_t i = 0; i < got.size(); ++i)
      if (!(std::abs(to_float(got[i]) - want[i]) <= tol * (1.0 + std::abs(want[i]))) && ++bad <= 5)
        ADD_FAILURE() << what << "[" << i << "] " << to_float(got[i]) << " vs " << want[i];
    EXPECT_EQ(bad, 0) << what;
  };
  cmp(out, f.out, 8e-3, "out");
  for (size_t i = 0; i < lse.size(); ++i) ASSERT_NEAR(lse[i], f.lse[i], 1e-5 * (1 + std::abs(f.lse[i])));
  // Backward reads the bf16-rounded output, so its gradients differ from f32 by a bit more than
  // one rounding.
  cmp(dq, f.dq, 2e-2, "dq");
  cmp(dk, f.dk, 2e-2, "dk");
  cmp(dv, f.dv, 2e-2, "dv");
}

TEST(OpsAttentionDeterminism, BitIdenticalRuns) {
  const int saved = omp_get_max_threads();
  for (int threads : {2, 4}) {
    SCOPED_TRACE(testing::Message() << threads << " threads");
    omp_set_num_threads(threads);
    for (const Case& c : {Case{{2, 300, 4, 2, 64}, two_docs(2, 300, 130)},
                          Case{{1, 300, 4, 1, 32}, {}}}) {  // second one splits keys into chunks
      const Vec q = randn(c.nq(), 31), k = randn(c.nk(), 32), v = randn(c.nk(), 33);
      const Vec dout = randn(c.nq(), 34);
      const Got a = run_f32(c, q, k, v, &dout), b = run_f32(c, q, k, v, &dout);
      auto same = [](const Vec& x, const Vec& y) {
        return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * 4) == 0;
      };
      EXPECT_TRUE(same(a.out, b.out) && same(a.lse, b.lse));
      EXPECT_TRUE(same(a.dq, b.dq) && same(a.dk, b.dk) && same(a.dv, b.dv));
    }
  }
  omp_set_num_threads(saved);
}

}  // namespace
}  // namespace mt
