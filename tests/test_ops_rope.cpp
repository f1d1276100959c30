#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/bf16.h"
#include "finite_diff.h"
#include "kernels/cpu/rope.h"

namespace mt {
namespace {

using test::random_normal;

struct Tables {
  int64_t max_pos, D;
  std::vector<float> cos, sin;
  Tables(int64_t max_pos_, int64_t D_, float theta = 10000.0f, RopeScaling s = {})
      : max_pos(max_pos_), D(D_), cos(max_pos_ * D_ / 2), sin(max_pos_ * D_ / 2) {
    rope_tables(cos.data(), sin.data(), max_pos, D, theta, s);
  }
};

TEST(OpsRope, InvFreqWithoutScaling) {
  std::vector<float> f(4);
  rope_inv_freq(f.data(), 8, 10000.0f, RopeScaling{});
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(f[i], float(std::pow(10000.0, -2.0 * i / 8)));
}

// D = 8, theta = 500000, factor 8, low 1, high 4, original 8192: the wavelengths 2 pi / f are
// 6.28, 167.1, 4442.9, 118143, against high_freq_wavelen 8192/4 = 2048 and low 8192/1 = 8192:
//   i = 0, 1: wavelength < 2048, kept: 1 and 500000^-1/4 = 0.0376060309
//   i = 2: 500000^-1/2 = 0.00141421356, wavelength 4442.88 is in between:
//          smooth = (8192 / 4442.88 - 1) / 3 = 0.281283, f = (1 - smooth) f/8 + smooth f = 5.24846e-4
//   i = 3: wavelength > 8192, divided by 8: 500000^-3/4 / 8 = 5.31830e-5 / 8 = 6.64787e-6
TEST(OpsRope, Llama3ScalingMatchesHandDerivedValues) {
  RopeScaling s;
  s.factor = 8.0f, s.low_freq_factor = 1.0f, s.high_freq_factor = 4.0f;
  s.original_max_position_embeddings = 8192;
  std::vector<float> f(4), plain(4);
  rope_inv_freq(f.data(), 8, 500000.0f, s);
  rope_inv_freq(plain.data(), 8, 500000.0f, RopeScaling{});
  EXPECT_EQ(f[0], plain[0]);
  EXPECT_EQ(f[1], plain[1]);
  EXPECT_FLOAT_EQ(f[0], 1.0f);
  EXPECT_NEAR(f[1], 0.0376060309f, 1e-9);
  EXPECT_NEAR(f[2], 5.24846e-4f, 1e-9);
  EXPECT_FLOAT_EQ(f[3], plain[3] / 8.0f);
  EXPECT_NEAR(f[3], 6.64787e-6f, 1e-11);
}

TEST(OpsRope, TablesAreCosSinOfPositionTimesFreq) {
  Tables t(100, 16);
  std::vector<float> f(8);
  rope_inv_freq(f.data(), 16, 10000.0f, RopeScaling{});
  for (int64_t p : {0, 1, 37, 99})
    for (int64_t i = 0; i < 8; ++i) {
      EXPECT_NEAR(t.cos[p * 8 + i], std::cos(double(p) * f[i]), 1e-7);
      EXPECT_NEAR(t.sin[p * 8 + i], std::sin(double(p) * f[i]), 1e-7);
    }
}

TEST(OpsRope, ForwardRotatesPairsAndBackwardInverts) {
  const int64_t N = 5, H = 3, D = 8, half = D / 2;
  Tables t(64, D);
  std::vector<int32_t> pos = {0, 1, 7, 63, 20};
  const std::vector<float> x0 = random_normal(N * H * D, 1);
  std::vector<float> x = x0;
  rope_forward(x.data(), t.cos.data(), t.sin.data(), pos.data(), N, H, D);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < half; ++i) {
        const int64_t lo = (n * H + h) * D + i, hi = lo + half;
        const double c = t.cos[pos[n] * half + i], s = t.sin[pos[n] * half + i];
        EXPECT_NEAR(x[lo], x0[lo] * c - x0[hi] * s, 1e-6);  // HF rotate_half layout
        EXPECT_NEAR(x[hi], x0[hi] * c + x0[lo] * s, 1e-6);
        EXPECT_NEAR(std::hypot(x[lo], x[hi]), std::hypot(x0[lo], x0[hi]), 1e-5);  // a rotation
        if (pos[n] == 0) {
          EXPECT_EQ(x[lo], x0[lo]);
        }
      }
  rope_backward(x.data(), t.cos.data(), t.sin.data(), pos.data(), N, H, D);
  for (int64_t i = 0; i < N * H * D; ++i) EXPECT_NEAR(x[i], x0[i], 1e-5);
}

TEST(OpsRope, BackwardMatchesFiniteDifferences) {
  const int64_t N = 3, H = 2, D = 6;
  Tables t(32, D);
  std::vector<int32_t> pos = {3, 0, 31};
  std::vector<float> x = random_normal(N * H * D, 2), R = random_normal(N * H * D, 3);
  auto loss = [&](std::vector<float> v) {
    rope_forward(v.data(), t.cos.data(), t.sin.data(), pos.data(), N, H, D);
    return test::projection(v, R);
  };
  std::vector<float> dx = R;
  rope_backward(dx.data(), t.cos.data(), t.sin.data(), pos.data(), N, H, D);
  test::expect_grad_near(dx, test::central_diff(loss, x), "dx");
}

TEST(OpsRope, Bf16MatchesF32) {
  const int64_t N = 64, H = 8, D = 64;  // threaded size
  Tables t(2048, D, 500000.0f);
  std::vector<int32_t> pos(N);
  for (int64_t n = 0; n < N; ++n) pos[n] = int32_t((n * 37) % 2048);
  std::vector<float> x = random_normal(N * H * D, 4);
  std::vector<bf16> xb(x.size());
  convert(xb.data(), x.data(), x.size());
  convert(x.data(), xb.data(), x.size());  // same inputs for both
  for (bool fwd : {true, false}) {
    std::vector<float> yf = x;
    std::vector<bf16> yb = xb;
    if (fwd) {
      rope_forward(yf.data(), t.cos.data(), t.sin.data(), pos.data(), N, H, D);
      rope_forward(yb.data(), t.cos.data(), t.sin.data(), pos.data(), N, H, D);
    } else {
      rope_backward(yf.data(), t.cos.data(), t.sin.data(), pos.data(), N, H, D);
      rope_backward(yb.data(), t.cos.data(), t.sin.data(), pos.data(), N, H, D);
    }
    for (size_t i = 0; i < yf.size(); ++i)
      ASSERT_NEAR(to_float(yb[i]), yf[i], 1e-2 * std::fabs(yf[i]) + 1e-6) << fwd << " " << i;
  }
}

}  // namespace
}  // namespace mt
