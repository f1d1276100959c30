#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include <omp.h>

#include "core/bf16.h"
#include "finite_diff.h"
#include "kernels/cpu/fast_exp.h"
#include "kernels/cpu/swiglu.h"
#include "kernels/device_math/swiglu_element.h"

namespace mt {
namespace {

using test::random_normal;

TEST(OpsSwiglu, ForwardMatchesNaive) {
  std::vector<float> gate = random_normal(64, 1, 3.0f), up = random_normal(64, 2);
  // Extremes: the sigmoid saturates without producing inf or NaN.
  gate[0] = 0.0f, gate[1] = 100.0f, gate[2] = -100.0f, gate[3] = 88.5f, gate[4] = -88.5f;
  std::vector<float> h(64);
  swiglu_forward(h.data(), gate.data(), up.data(), 64);
  for (int i = 0; i < 64; ++i) {
    const double g = gate[i], ref = g / (1.0 + std::exp(-g)) * up[i];
    ASSERT_NEAR(h[i], ref, 1e-6 * (1 + std::fabs(ref))) << i << " gate " << g;
  }
}

TEST(OpsSwiglu, BackwardMatchesFiniteDifferences) {
  const int64_t n = 16;
  std::vector<float> gate = random_normal(n, 3, 2.0f), up = random_normal(n, 4),
                     R = random_normal(n, 5);
  auto loss = [&](const std::vector<float>& g, const std::vector<float>& u) {
    std::vector<float> h(n);
    swiglu_forward(h.data(), g.data(), u.data(), n);
    return test::projection(h, R);
  };
  std::vector<float> dgate(n, 7.0f), dup(n, 7.0f);  // overwritten, not accumulated
  swiglu_backward(dgate.data(), dup.data(), R.data(), gate.data(), up.data(), n);
  test::expect_grad_near(dgate, test::central_diff([&](auto& g) { return loss(g, up); }, gate),
                         "dgate");
  test::expect_grad_near(dup, test::central_diff([&](auto& u) { return loss(gate, u); }, up),
                         "dup");
}

// Gradients may be written over the activations they are computed from.
TEST(OpsSwiglu, BackwardInPlaceOverInputs) {
  const int64_t n = 100;
  std::vector<float> gate = random_normal(n, 6), up = random_normal(n, 7), dh = random_normal(n, 8);
  std::vector<float> dgate(n), dup(n);
  swiglu_backward(dgate.data(), dup.data(), dh.data(), gate.data(), up.data(), n);
  swiglu_backward(gate.data(), up.data(), dh.data(), gate.data(), up.data(), n);
  EXPECT_EQ(gate, dgate);
  EXPECT_EQ(up, dup);
}

TEST(OpsSwiglu, Bf16MatchesF32) {
  const int64_t n = 1 << 16;  // threaded size
  std::vector<float> gate = random_normal(n, 9, 3.0f), up = random_normal(n, 10),
                     dh = random_normal(n, 11);
  std::vector<bf16> gb(n), ub(n), db(n);
  convert(gb.data(), gate.data(), n), convert(gate.data(), gb.data(), n);
  convert(ub.data(), up.data(), n), convert(up.data(), ub.data(), n);
  convert(db.data(), dh.data(), n), convert(dh.data(), db.data(), n);
  std::vector<float> hf(n), dgf(n), duf(n);
  std::vector<bf16> hb(n), dgb(n), dub(n);
  swiglu_forward(hf.data(), gate.data(), up.data(), n);
  swiglu_forward(hb.data(), gb.data(), ub.data(), n);
  swiglu_backward(dgf.data(), duf.data(), dh.data(), gate.data(), up.data(), n);
  swiglu_backward(dgb.data(), dub.data(), db.data(), gb.data(), ub.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_NEAR(to_float(hb[i]), hf[i], 1e-2 * std::fabs(hf[i]) + 1e-6) << i;
    ASSERT_NEAR(to_float(dgb[i]), dgf[i], 1e-2 * std::fabs(dgf[i]) + 1e-6) << i;
    ASSERT_NEAR(to_float(dub[i]), duf[i], 1e-2 * std::fabs(duf[i]) + 1e-6) << i;
  }
}

// The kernels run the sigmoid's exp over blocks (fast_exp_block.h), threads taking whole blocks:
// each output is the per-element arithmetic's bits, with one thread or two, at a length that is
// not a multiple of the block or of 8.
TEST(OpsSwiglu, BlockedKernelsGiveThePerElementBitsAtAnyThreadCount) {
  const int64_t n = (1 << 16) + 13;  // above the kernels' threading threshold
  std::vector<float> gate = random_normal(n, 31, 4.0f), up = random_normal(n, 32),
                     dh = random_normal(n, 33);
  const int threads = omp_get_max_threads();
  for (int t : {1, 2}) {
    omp_set_num_threads(t);
    std::vector<float> h(n), dg(n), du(n);
    swiglu_forward(h.data(), gate.data(), up.data(), n);
    swiglu_backward(dg.data(), du.data(), dh.data(), gate.data(), up.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const float s = 1.0f / (1.0f + fast_exp(-gate[i]));
      const dm::SwigluGrads r = dm::swiglu_grads(gate[i], up[i], dh[i], s);
      ASSERT_EQ(std::bit_cast<uint32_t>(h[i]),
                std::bit_cast<uint32_t>(dm::swiglu_value(gate[i], up[i], s)))
          << i << " threads " << t;
      ASSERT_EQ(std::bit_cast<uint32_t>(dg[i]), std::bit_cast<uint32_t>(r.dgate)) << i;
      ASSERT_EQ(std::bit_cast<uint32_t>(du[i]), std::bit_cast<uint32_t>(r.dup)) << i;
    }
  }
  omp_set_num_threads(threads);
}

}  // namespace
}  // namespace mt
