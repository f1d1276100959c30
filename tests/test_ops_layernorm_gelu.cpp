// The CPU kernels of GPT-2's LayerNorm (weight and bias) and tanh GeLU: backward against central
// finite differences of the forward, and the threaded weight/bias sums against serial ones. (The
// CPU against the reference backend, f32 and bf16: BackendOps.LayerNormMatchesReference and
// BackendOps.GeluMatchesReference.)
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/bf16.h"
#include "finite_diff.h"
#include <omp.h>

#include "kernels/cpu/fast_exp_block.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/gelu_sigmoid.h"
#include "kernels/cpu/layernorm.h"

namespace mt {
namespace {

using test::random_normal;
constexpr float kLnEps = 1e-5f;

std::vector<float> shifted(std::vector<float> v, float by) {
  for (float& x : v) x += by;
  return v;
}

TEST(OpsLayerNorm, BackwardMatchesFiniteDifferences) {
  const int64_t N = 3, C = 8;
  const std::vector<float> x = shifted(random_normal(N * C, 3), 0.5f), w = random_normal(C, 4),
                           b = random_normal(C, 5), R = random_normal(N * C, 6);
  auto loss_of = [&](const std::vector<float>& xx, const std::vector<float>& ww,
                     const std::vector<float>& bb) {
    std::vector<float> out(N * C), mean(N), rstd(N);
    layernorm_forward(out.data(), mean.data(), rstd.data(), xx.data(), ww.data(), bb.data(), N, C, kLnEps);
    return test::projection(out, R);
  };
  std::vector<float> out(N * C), mean(N), rstd(N);
  layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, kLnEps);
  // Start from non-zero gradients: all three are accumulated into.
  std::vector<float> dx(N * C, 0.5f), dw(C, 0.25f), db(C, -0.25f);
  layernorm_backward(dx.data(), dw.data(), db.data(), R.data(), x.data(), w.data(), mean.data(),
                     rstd.data(), N, C);
  for (auto& g : dx) g -= 0.5f;
  for (auto& g : dw) g -= 0.25f;
  for (auto& g : db) g += 0.25f;
  test::expect_grad_near(dx, test::central_diff([&](auto& v) { return loss_of(v, w, b); }, x), "dx");
  test::expect_grad_near(dw, test::central_diff([&](auto& v) { return loss_of(x, v, b); }, w), "dw");
  test::expect_grad_near(db, test::central_diff([&](auto& v) { return loss_of(x, w, v); }, b), "db");

  // A frozen norm (dw, db null) gives the same dx.
  std::vector<float> dx2(N * C, 0.5f);
  layernorm_backward(dx2.data(), static_cast<float*>(nullptr), static_cast<float*>(nullptr),
                     R.data(), x.data(), w.data(), mean.data(), rstd.data(), N, C);
  for (int64_t i = 0; i < N * C; ++i) EXPECT_EQ(dx2[i] - 0.5f, dx[i]);
}

// Threaded size: dw and db are split by columns among threads; check them against serial sums,
// and the forward's statistics against a direct computation.
TEST(OpsLayerNorm, ThreadedMatchesSerialSums) {
  const int64_t N = 64, C = 770;  // C not a multiple of the per-thread column block
  const std::vector<float> x = shifted(random_normal(N * C, 7, 2.0f), -3.0f),
                           w = random_normal(C, 8), b = random_normal(C, 9),
                           dout = random_normal(N * C, 10);
  std::vector<float> out(N * C), mean(N), rstd(N), dx(N * C, 0.0f), dw(C, 0.0f), db(C, 0.0f);
  layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, kLnEps);
  layernorm_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), mean.data(),
                     rstd.data(), N, C);
  for (int64_t n = 0; n < N; ++n) {
    double s = 0, ss = 0;
    for (int64_t c = 0; c < C; ++c) s += x[n * C + c];
    const double m = s / C;
    for (int64_t c = 0; c < C; ++c) ss += (x[n * C + c] - m) * (x[n * C + c] - m);
    ASSERT_NEAR(mean[n], m, 1e-6 * (1 + std::fabs(m))) << n;
    ASSERT_NEAR(rstd[n], 1.0 / std::sqrt(ss / C + kLnEps), 1e-6 * rstd[n]) << n;
  }
  for (int64_t c = 0; c < C; ++c) {
    double sw = 0, sb = 0;
    for (int64_t n = 0; n < N; ++n) {
      sw += double(dout[n * C + c]) * (x[n * C + c] - mean[n]) * rstd[n];
      sb += dout[n * C + c];
    }
    ASSERT_NEAR(dw[c], sw, 1e-5 * (1 + std::fabs(sw))) << c;
    ASSERT_NEAR(db[c], sb, 1e-5 * (1 + std::fabs(sb))) << c;
  }
}

TEST(OpsGelu, BackwardMatchesFiniteDifferences) {
  const int64_t n = 31;
  const std::vector<float> x = random_normal(n, 11, 2.5f), R = random_normal(n, 12);
  auto loss_of = [&](const std::vector<float>& xx) {
    std::vector<float> h(n);
    gelu_forward(h.data(), xx.data(), n);
    return test::projection(h, R);
  };
  std::vector<float> dx(n);
  gelu_backward(dx.data(), R.data(), x.data(), n);
  test::expect_grad_near(dx, test::central_diff(loss_of, x), "gelu dx");
}

TEST(OpsGelu, Bf16MatchesF32AndRunsInPlace) {
  const int64_t n = 1 << 16;  // threaded
  const std::vector<float> x = random_normal(n, 13, 3.0f);
  std::vector<bf16> xb(n);
  convert(xb.data(), x.data(), x.size());
  std::vector<float> xr(n);
  convert(xr.data(), xb.data(), xb.size());  // the bf16 inputs, as f32
  std::vector<float> hf(n);
  gelu_forward(hf.data(), xr.data(), n);
  gelu_forward(xb.data(), xb.data(), n);  // in place
  for (int64_t i = 0; i < n; ++i)
    ASSERT_NEAR(to_float(xb[i]), hf[i], 1e-2 * std::fabs(hf[i]) + 1e-6) << i;
}

// The CPU's sigmoid form of the tanh GeLU (kernels/cpu/gelu_sigmoid.h, vectorised with fast_exp)
// within the error its header states, against the formula in double on floats spread over
// [-10, 10] (every 4099th bit pattern, both signs). The double is written in the sigmoid form too:
// in the (1 + tanh u) form even double cancels to 0 for x below about -7.
TEST(OpsGelu, SigmoidFormWithinStatedError) {
  const double k = std::sqrt(2.0 / 3.14159265358979323846), c = 0.044715;
  double worst_gelu = 0, worst_slope = 0;
  int64_t checked = 0;
  for (uint32_t bits = 0; bits <= std::bit_cast<uint32_t>(10.0f); bits += 4099)
    for (float x : {std::bit_cast<float>(bits), -std::bit_cast<float>(bits)}) {
      const double u = k * (x + c * double(x) * x * x), e = std::exp(-2.0 * u), s = 1.0 / (1.0 + e);
      const double gelu = x * s, slope = s + 2.0 * x * k * (1.0 + 3.0 * c * double(x) * x) * s * (e * s);
      if (std::fabs(gelu) >= 1e-37)  // a normal float: relative error is meaningful
        worst_gelu = std::max(worst_gelu, std::fabs(gelu_tanh_vectorisable(x) - gelu) / std::fabs(gelu));
      worst_slope = std::max(worst_slope, std::fabs(gelu_tanh_derivative_vectorisable(x) - slope) /
                                              std::max(1.0, std::fabs(slope)));
      ++checked;
    }
  EXPECT_GT(checked, 500000);
  EXPECT_LE(worst_gelu, 1.4e-5);
  EXPECT_LE(worst_slope, 2.1e-7);
  // Far outside: gelu -> x for large x, -> 0 (never NaN) for very negative x.
  EXPECT_EQ(gelu_tanh_vectorisable(100.0f), 100.0f);
  EXPECT_EQ(gelu_tanh_derivative_vectorisable(100.0f), 1.0f);
  EXPECT_LE(std::fabs(gelu_tanh_vectorisable(-100.0f)), 1e-30f);
  EXPECT_LE(std::fabs(gelu_tanh_derivative_vectorisable(-100.0f)), 1e-30f);
}

// fast_exp_inplace's eight-lane arithmetic (fast_exp_block.h) gives the scalar fast_exp's bits:
// every 4099th float bit pattern (both signs, NaN and inf included) and the clamp edges, in a
// buffer whose length leaves a scalar tail.
TEST(FastExpBlock, LanesMatchTheScalarFunctionBitForBit) {
  std::vector<float> x = {0.0f, -0.0f, -87.0f, 88.0f, std::nextafter(-87.0f, -100.0f),
                          std::nextafter(88.0f, 100.0f), 1e-45f, -1e-45f};
  for (uint64_t bits = 0; bits <= 0xffffffffull; bits += 4099)
    x.push_back(std::bit_cast<float>(uint32_t(bits)));
  x.push_back(0.5f);  // length not a multiple of 8: the tail goes through fast_exp itself
  ASSERT_NE(x.size() % 8, 0u);
  std::vector<float> y = x;
  fast_exp_inplace(y.data(), int64_t(y.size()));
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(y[i]), std::bit_cast<uint32_t>(fast_exp(x[i])))
        << i << " x = " << x[i];
}

// The GeLU kernels run the exp over blocks, threads taking whole blocks: each output is the
// per-element formula's bits (gelu_sigmoid.h), with one thread or two, at a length that is not a
// multiple of the block or of 8.
TEST(OpsGelu, BlockedKernelsGiveThePerElementBitsAtAnyThreadCount) {
  const int64_t n = (1 << 16) + 13;  // above the kernels' threading threshold
  std::vector<float> xf = random_normal(n, 21, 4.0f), dh = random_normal(n, 22);
  std::vector<bf16> xb(n), dhb(n);
  convert(xb.data(), xf.data(), n);
  convert(dhb.data(), dh.data(), n);
  const int threads = omp_get_max_threads();
  for (int t : {1, 2}) {
    omp_set_num_threads(t);
    std::vector<float> h(n), dx(n);
    std::vector<bf16> hb(n), dxb(n);
    gelu_forward(h.data(), xf.data(), n);
    gelu_backward(dx.data(), dh.data(), xf.data(), n);
    gelu_forward(hb.data(), xb.data(), n);
    gelu_backward(dxb.data(), dhb.data(), xb.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(h[i]),
                std::bit_cast<uint32_t>(gelu_tanh_vectorisable(xf[i])))
          << i << " threads " << t;
      ASSERT_EQ(std::bit_cast<uint32_t>(dx[i]),
                std::bit_cast<uint32_t>(dh[i] * gelu_tanh_derivative_vectorisable(xf[i])))
          << i << " threads " << t;
      const float xi = to_float(xb[i]);
      ASSERT_EQ(hb[i].bits, float_to_bf16(gelu_tanh_vectorisable(xi)).bits) << i;
      ASSERT_EQ(dxb[i].bits,
                float_to_bf16(to_float(dhb[i]) * gelu_tanh_derivative_vectorisable(xi)).bits)
          << i;
    }
  }
  omp_set_num_threads(threads);
}

}  // namespace
}  // namespace mt
