#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/bf16.h"
#include "finite_diff.h"
#include "kernels/cpu/rmsnorm.h"

namespace mt {
namespace {

using test::random_normal;
constexpr float kEps = 1e-5f;

// Naive double reference: out = x / sqrt(mean(x^2) + eps) * w.
std::vector<double> naive_forward(const std::vector<float>& x, const std::vector<float>& w,
                                  int64_t N, int64_t C) {
  std::vector<double> out(N * C);
  for (int64_t n = 0; n < N; ++n) {
    double ss = 0;
    for (int64_t c = 0; c < C; ++c) ss += double(x[n * C + c]) * x[n * C + c];
    const double r = 1.0 / std::sqrt(ss / C + kEps);
    for (int64_t c = 0; c < C; ++c) out[n * C + c] = x[n * C + c] * r * w[c];
  }
  return out;
}

TEST(OpsRmsNorm, ForwardMatchesNaive) {
  // The second shape is large enough to run threaded.
  for (auto [N, C] : {std::pair<int64_t, int64_t>{3, 16}, {64, 768}}) {
    std::vector<float> x = random_normal(N * C, 1, 2.0f), w = random_normal(C, 2);
    std::vector<float> out(N * C), rstd(N);
    rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, kEps);
    std::vector<double> ref = naive_forward(x, w, N, C);
    for (int64_t i = 0; i < N * C; ++i) ASSERT_NEAR(out[i], ref[i], 1e-5 * (1 + std::fabs(ref[i])));
    for (int64_t n = 0; n < N; ++n) {
      double ss = 0;
      for (int64_t c = 0; c < C; ++c) ss += double(x[n * C + c]) * x[n * C + c];
      EXPECT_NEAR(rstd[n], 1.0 / std::sqrt(ss / C + kEps), 1e-6 * rstd[n]);
    }
  }
}

TEST(OpsRmsNorm, BackwardMatchesFiniteDifferences) {
  const int64_t N = 3, C = 8;
  std::vector<float> x = random_normal(N * C, 3), w = random_normal(C, 4),
                     R = random_normal(N * C, 5);
  auto loss_of = [&](const std::vector<float>& xx, const std::vector<float>& ww) {
    std::vector<float> out(N * C), rstd(N);
    rmsnorm_forward(out.data(), rstd.data(), xx.data(), ww.data(), N, C, kEps);
    return test::projection(out, R);
  };
  std::vector<float> out(N * C), rstd(N);
  rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, kEps);
  // Start from non-zero gradients: both are accumulated into.
  std::vector<float> dx(N * C, 0.5f), dw(C, 0.25f);
  rmsnorm_backward(dx.data(), dw.data(), R.data(), x.data(), w.data(), rstd.data(), N, C);
  for (auto& g : dx) g -= 0.5f;
  for (auto& g : dw) g -= 0.25f;
  test::expect_grad_near(dx, test::central_diff([&](auto& v) { return loss_of(v, w); }, x), "dx");
  test::expect_grad_near(dw, test::central_diff([&](auto& v) { return loss_of(x, v); }, w), "dw");

  // A frozen weight (dw null) gives the same dx.
  std::vector<float> dx2(N * C, 0.5f);
  rmsnorm_backward(dx2.data(), static_cast<float*>(nullptr), R.data(), x.data(), w.data(),
                   rstd.data(), N, C);
  for (int64_t i = 0; i < N * C; ++i) EXPECT_EQ(dx2[i] - 0.5f, dx[i]);
}

// Threaded size: dw is split by columns among threads; check it against a serial double sum.
TEST(OpsRmsNorm, BackwardWeightMatchesSerialSumWhenThreaded) {
  const int64_t N = 64, C = 770;  // C not a multiple of the per-thread column block
  std::vector<float> x = random_normal(N * C, 6), w = random_normal(C, 7),
                     dout = random_normal(N * C, 8);
  std::vector<float> out(N * C), rstd(N), dx(N * C, 0.0f), dw(C, 0.0f);
  rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, kEps);
  rmsnorm_backward(dx.data(), dw.data(), dout.data(), x.data(), w.data(), rstd.data(), N, C);
  for (int64_t c = 0; c < C; ++c) {
    double s = 0;
    for (int64_t n = 0; n < N; ++n) s += double(dout[n * C + c]) * x[n * C + c] * rstd[n];
    ASSERT_NEAR(dw[c], s, 1e-5 * (1 + std::fabs(s))) << c;
  }
}

TEST(OpsRmsNorm, Bf16MatchesF32) {
  const int64_t N = 64, C = 768;
  std::vector<float> x = random_normal(N * C, 9), w = random_normal(C, 10),
                     g = random_normal(N * C, 11);
  std::vector<float> outf(N * C), rstdf(N), rstdb(N);
  std::vector<bf16> outb(N * C);
  rmsnorm_forward(outf.data(), rstdf.data(), x.data(), w.data(), N, C, kEps);
  rmsnorm_forward(outb.data(), rstdb.data(), x.data(), w.data(), N, C, kEps);
  EXPECT_EQ(rstdf, rstdb);
  for (int64_t i = 0; i < N * C; ++i)
    ASSERT_NEAR(to_float(outb[i]), outf[i], 1e-2 * std::fabs(outf[i]) + 1e-6) << i;

  // Same (bf16-representable) upstream gradient through both instantiations.
  std::vector<bf16> gb(N * C);
  convert(gb.data(), g.data(), g.size());
  convert(g.data(), gb.data(), g.size());
  std::vector<float> dxf(N * C, 0.0f), dxb(N * C, 0.0f), dwf(C, 0.0f), dwb(C, 0.0f);
  rmsnorm_backward(dxf.data(), dwf.data(), g.data(), x.data(), w.data(), rstdf.data(), N, C);
  rmsnorm_backward(dxb.data(), dwb.data(), gb.data(), x.data(), w.data(), rstdf.data(), N, C);
  for (int64_t i = 0; i < N * C; ++i) ASSERT_NEAR(dxb[i], dxf[i], 1e-5 * (1 + std::fabs(dxf[i])));
  for (int64_t c = 0; c < C; ++c) ASSERT_NEAR(dwb[c], dwf[c], 1e-5 * (1 + std::fabs(dwf[c])));
}

}  // namespace
}  // namespace mt
