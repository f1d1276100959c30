// The attention op's context-parallel form (backend.h AttentionDims::cp): a rank's queries are
// chunks r and 2cp-1-r of a sequence and its keys the whole sequence. Checked on the reference
// and the CPU backend against the op run on the whole sequence (cp = 1, itself tested against
// finite differences and a naive reference in test_ops_attention.cpp): every rank's outputs and
// query gradients are the whole run's rows, and the key and value gradients of the ranks sum to
// the whole run's. Also the CPU kernel against the reference in this layout, and the CPU
// kernel's key gradients against finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/device_buffer.h"
#include "backend/reference_backend.h"
#include "finite_diff.h"
#include "kernels/device_math/cp_positions.h"

namespace mt {
namespace {

using Vec = std::vector<float>;

Vec random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  Vec v(n);
  for (float& x : v) x = nd(rng);
  return v;
}

struct Sizes {
  int64_t B, S, Hq, Hkv, D, window;  // S: tokens of a whole row
  bool documents;                    // two packed documents a row, cut inside a chunk
};

// Host arrays in, host arrays out, through one backend.
struct OpResult {
  Vec out, dq, dk, dv;
};
OpResult run_op(Backend& be, const Sizes& s, int64_t cp, int64_t rank, const Vec& q, const Vec& k,
           const Vec& v, const Vec& dout, const std::vector<int32_t>& seg, bool backward = true) {
  const int64_t T = s.S / cp, qw = s.Hq * s.D, kw = s.Hkv * s.D, Nq = s.B * T, Nk = s.B * s.S;
  auto upload = [&](DeviceBuffer& buf, const Vec& host, int64_t rows, int64_t cols) {
    buf.resize(be, DType::f32, rows * cols);
    const Tensor t = buf.slice(0, rows, cols);
    if (!host.empty()) be.copy_from_host(t, host.data());
    return t;
  };
  DeviceBuffer bq, bk, bv, bo, blse, bdo, bdq, bdk, bdv, bseg;
  const Tensor tq = upload(bq, q, Nq, qw), tk = upload(bk, k, Nk, kw), tv = upload(bv, v, Nk, kw);
  const Tensor to = upload(bo, {}, Nq, qw), tlse = upload(blse, {}, Nq, s.Hq);
  Tensor tseg;
  if (!seg.empty()) {
    bseg.resize(be, DType::i32, Nk);
    tseg = bseg.slice(0, Nk, 1);
    be.copy_from_host(tseg, seg.data());
  }
  AttentionDims d{s.B, T, s.Hq, s.Hkv, s.D, s.window};
  d.cp = cp, d.cp_rank = rank;
  be.attention_forward(to, tlse, tq, tk, tv, tseg, d);
  OpResult r;
  r.out.resize(size_t(Nq * qw));
  be.copy_to_host(r.out.data(), to);
  if (!backward) return r;
  const Tensor tdo = upload(bdo, dout, Nq, qw), tdq = upload(bdq, {}, Nq, qw);
  const Tensor tdk = upload(bdk, {}, Nk, kw), tdv = upload(bdv, {}, Nk, kw);
  be.fill(tdk, NAN), be.fill(tdv, NAN);  // every key's gradient must be written
  be.attention_backward(tdq, tdk, tdv, tdo, to, tlse, tq, tk, tv, tseg, d);
  r.dq.resize(size_t(Nq * qw)), r.dk.resize(size_t(Nk * kw)), r.dv.resize(size_t(Nk * kw));
  be.copy_to_host(r.dq.data(), tdq);
  be.copy_to_host(r.dk.data(), tdk);
  be.copy_to_host(r.dv.data(), tdv);
  return r;
}

// Rank `rank`'s rows of a [B, S, width] array: its queries' true positions, in its order.
Vec share_of(const Vec& whole, const Sizes& s, int64_t cp, int64_t rank, int64_t width) {
  const int64_t T = s.S / cp;
  Vec out(size_t(s.B * T * width));
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t i = 0; i < T; ++i) {
      const int64_t p = dm::cp_query_position(i, T, cp, rank);
      std::copy_n(whole.begin() + (b * s.S + p) * width, width, out.begin() + (b * T + i) * width);
    }
  return out;
}

std::vector<int32_t> documents(const Sizes& s) {
  std::vector<int32_t> seg;
  if (!s.documents) return seg;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t t = 0; t < s.S; ++t) seg.push_back(t < s.S / 3 + 1 + b ? 7 : 9);
  return seg;
}

void expect_close(const Vec& got, const Vec& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(double(got[i]) - want[i]) <= tol * (1.0 + std::abs(double(want[i])))) && ++bad <= 5)
      ADD_FAILURE() << what << "[" << i << "] got " << got[i] << " want " << want[i];
  EXPECT_EQ(bad, 0) << what;
}

// Every rank's share of the whole-row op, on one backend.
void check_shares_equal_whole(Backend& be, const Sizes& s, int64_t cp, double tol) {
  const int64_t qw = s.Hq * s.D, kw = s.Hkv * s.D;
  const Vec q = random_values(size_t(s.B * s.S * qw), 1), k = random_values(size_t(s.B * s.S * kw), 2);
  const Vec v = random_values(size_t(s.B * s.S * kw), 3), dout = random_values(size_t(s.B * s.S * qw), 4);
  const std::vector<int32_t> seg = documents(s);
  const OpResult whole = run_op(be, s, 1, 0, q, k, v, dout, seg);
  Vec dk_sum(whole.dk.size(), 0.0f), dv_sum(whole.dv.size(), 0.0f);
  for (int64_t r = 0; r < cp; ++r) {
    SCOPED_TRACE("cp rank " + std::to_string(r));
    const OpResult part = run_op(be, s, cp, r, share_of(q, s, cp, r, qw), k, v, share_of(dout, s, cp, r, qw), seg);
    const Vec want_out = share_of(whole.out, s, cp, r, qw), want_dq = share_of(whole.dq, s, cp, r, qw);
    expect_close(part.out, {want_out.begin(), want_out.end()}, tol, "out");
    expect_close(part.dq, {want_dq.begin(), want_dq.end()}, tol, "dq");
    for (size_t i = 0; i < dk_sum.size(); ++i) dk_sum[i] += part.dk[i], dv_sum[i] += part.dv[i];
  }
  expect_close(dk_sum, whole.dk, tol, "dk summed over the cp ranks");
  expect_close(dv_sum, whole.dv, tol, "dv summed over the cp ranks");
}

// S = 200 at cp = 2 (chunks of 50: the CPU kernel's 64-query tiles straddle the two chunks of a
// share, and the 64-key tiles the chunks' borders) and S = 198 at cp = 3 (chunks of 33).
const Sizes kCases[] = {{2, 200, 4, 2, 8, 0, false},  {2, 200, 4, 2, 8, 0, true},
                        {1, 200, 2, 1, 16, 37, false}, {2, 198, 4, 2, 8, 0, true},
                        {1, 198, 4, 4, 8, 45, true}};

std::string describe(const Sizes& s) {
  return "B " + std::to_string(s.B) + " S " + std::to_string(s.S) + " window " + std::to_string(s.window) +
         (s.documents ? " documents" : "");
}

TEST(OpsAttentionContextParallel, ReferenceSharesEqualTheWholeRows) {
  for (const Sizes& s : kCases) {
    SCOPED_TRACE(describe(s));
    check_shares_equal_whole(reference_backend(), s, s.S % 3 == 0 ? 3 : 2, 1e-6);  // f32 results, summed in f32
  }
}

TEST(OpsAttentionContextParallel, CpuSharesEqualTheWholeRows) {
  for (const Sizes& s : kCases) {
    SCOPED_TRACE(describe(s));
    check_shares_equal_whole(cpu_backend(), s, s.S % 3 == 0 ? 3 : 2, 2e-5);
  }
}

TEST(OpsAttentionContextParallel, CpuMatchesReferenceOnEveryRank) {
  const Sizes s{2, 200, 4, 2, 8, 0, true};
  const int64_t cp = 4, T = s.S / cp;  // chunks of 25
  const Vec k = random_values(size_t(s.B * s.S * s.Hkv * s.D), 12), v = random_values(k.size(), 13);
  const std::vector<int32_t> seg = documents(s);
  for (int64_t r = 0; r < cp; ++r) {
    SCOPED_TRACE("cp rank " + std::to_string(r));
    const Vec q = random_values(size_t(s.B * T * s.Hq * s.D), uint32_t(20 + r)), dout = random_values(q.size(), 30);
    const OpResult ref = run_op(reference_backend(), s, cp, r, q, k, v, dout, seg);
    const OpResult cpu = run_op(cpu_backend(), s, cp, r, q, k, v, dout, seg);
    expect_close(cpu.out, ref.out, 2e-5, "out");
    expect_close(cpu.dq, ref.dq, 1e-4, "dq");
    expect_close(cpu.dk, ref.dk, 1e-4, "dk");
    expect_close(cpu.dv, ref.dv, 1e-4, "dv");
  }
}

TEST(OpsAttentionContextParallel, CpuGradientsMatchFiniteDifferences) {
  // L = sum(out * R) on rank 1 of cp = 2: chunks 1 and 2 of four; keys of chunk 3 get no gradient.
  const Sizes s{1, 12, 2, 1, 4, 0, true};
  const int64_t cp = 2, rank = 1, T = s.S / cp;
  Vec q = random_values(size_t(T * s.Hq * s.D), 41), k = random_values(size_t(s.S * s.Hkv * s.D), 42);
  Vec v = random_values(k.size(), 43);
  const Vec R = random_values(q.size(), 44);
  const std::vector<int32_t> seg = documents(s);
  const OpResult g = run_op(cpu_backend(), s, cp, rank, q, k, v, R, seg);
  auto loss = [&]() {
    const OpResult f = run_op(cpu_backend(), s, cp, rank, q, k, v, R, seg, false);
    double L = 0;
    for (size_t i = 0; i < f.out.size(); ++i) L += double(f.out[i]) * R[i];
    return L;
  };
  test::expect_grad_matches_nudges(q, g.dq, loss, "dq");
  test::expect_grad_matches_nudges(k, g.dk, loss, "dk");
  test::expect_grad_matches_nudges(v, g.dv, loss, "dv");
  // The last chunk's keys come after every query of this rank.
  for (int64_t t = 3 * T / 2; t < s.S; ++t)
    for (int64_t e = 0; e < s.Hkv * s.D; ++e) EXPECT_EQ(g.dk[size_t(t * s.Hkv * s.D + e)], 0.0f);
}

TEST(OpsAttentionContextParallel, RefusesAnOddShare) {
  const Sizes s{1, 10, 2, 1, 4, 0, false};
  const Vec q = random_values(size_t(5 * 2 * 4), 1), k = random_values(size_t(10 * 4), 2);
  try {
    // cp = 2 with 5 queries a row: the share is not two equal chunks.
    run_op(cpu_backend(), s, 2, 0, q, k, k, {}, {}, false);
    FAIL() << "an odd share was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("context-parallel"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mt
