// The CPU AdamW kernel (kernels/cpu/adamw.cpp) and the gradient norm's sum of squares
// (kernels/cpu/sum_squares.cpp): bit-identical from run to run, whatever the thread count and
// however a tensor is cut, and equal to the reference backend within the tolerance of
// test_reference_backend.cpp's AdamWAndSumSquaresMatchReference. No timing here: bench_adamw.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backend/adamw_scalars.h"
#include "backend/backend.h"
#include "backend_tensors.h"
#include "core/bf16.h"
#include "finite_diff.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/sum_squares.h"
#include "kernels/reference/optimizer.h"

namespace mt {
namespace {

using Vec = std::vector<float>;

// Above the kernel's threading threshold (2^15) and not a multiple of its 256-element blocks, so
// the threaded loop and the padded last block both run.
constexpr int64_t kN = 100003;

struct State {
  Vec w, g, m, v;
  std::vector<bf16> w16;
};

State random_state(int64_t n) {
  State s{test::random_normal(size_t(n), 201), test::random_normal(size_t(n), 202),
          test::random_normal(size_t(n), 203, 0.1f), test::random_normal(size_t(n), 204, 0.1f),
          std::vector<bf16>(size_t(n))};
  for (float& e : s.v) e = e * e;
  return s;
}

const AdamWHyper kHyper{3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 3, 0.5f};

// The kernel over [0, n) in pieces of the given sizes (the last piece takes the rest).
void update_in_pieces(State& s, const AdamWScalars& k, const std::vector<int64_t>& pieces) {
  const int64_t n = int64_t(s.w.size());
  int64_t off = 0;
  for (size_t p = 0; off < n; ++p) {
    const int64_t len = p < pieces.size() ? std::min(pieces[p], n - off) : n - off;
    adamw_update(s.w.data() + off, s.w16.data() + off, s.g.data() + off, s.m.data() + off,
                 s.v.data() + off, len, k);
    off += len;
  }
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

void expect_same_bits(const State& a, const State& b, const std::string& what) {
  EXPECT_TRUE(same_bits(a.w, b.w)) << what << ": master";
  EXPECT_TRUE(same_bits(a.m, b.m)) << what << ": m";
  EXPECT_TRUE(same_bits(a.v, b.v)) << what << ": v";
  EXPECT_TRUE(same_bits(a.w16, b.w16)) << what << ": bf16 copy";
}

TEST(CpuAdamW, BitIdenticalRunToRunAndAcrossThreadCounts) {
  const AdamWScalars k = adamw_scalars(kHyper, true);
  const State start = random_state(kN);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  State first = start;
  update_in_pieces(first, k, {});
  for (int threads : {1, 2, 3, 4, 7}) {
    omp_set_num_threads(threads);
    for (int run = 0; run < 2; ++run) {
      State s = start;
      update_in_pieces(s, k, {});
      expect_same_bits(s, first, std::to_string(threads) + " threads, run " + std::to_string(run));
    }
  }
  omp_set_num_threads(saved);
}

TEST(CpuAdamW, AnElementsResultDoesNotDependOnWhereTheTensorIsCut) {
  // The same elements updated as one tensor, element by element, and in pieces that put every
  // element both in whole 256-element blocks and in a padded last block: the same bits.
  const AdamWScalars k = adamw_scalars(kHyper, false);
  const int64_t n = 3000;
  const State start = random_state(n);
  State whole = start;
  update_in_pieces(whole, k, {});
  State single = start;
  update_in_pieces(single, k, std::vector<int64_t>(size_t(n), 1));
  expect_same_bits(single, whole, "element by element");
  State odd = start;
  update_in_pieces(odd, k, {7, 255, 256, 257, 1, 513, 100});
  expect_same_bits(odd, whole, "pieces of 7, 255, 256, 257, 1, 513, 100, rest");
}

TEST(CpuAdamW, MatchesTheReferenceBackendAndWritesTheRoundedMaster) {
  for (bool decay : {false, true}) {
    const std::string what = std::string("decay ") + (decay ? "on" : "off");
    State s = random_state(kN);
    Vec rw = s.w, rm = s.m, rv = s.v;
    adamw_update(s.w.data(), s.w16.data(), s.g.data(), s.m.data(), s.v.data(), kN,
                 adamw_scalars(kHyper, decay));
    const Device host{};
    auto t = [&](Vec& x) { return Tensor(x.data(), DType::f32, 1, kN, host); };
    ref::adamw_update(t(rw), Tensor{}, t(s.g), t(rm), t(rv),
                      {kHyper.lr, kHyper.beta1, kHyper.beta2, kHyper.eps, kHyper.weight_decay,
                       kHyper.t, kHyper.grad_scale, decay});
    // test_reference_backend.cpp's tolerance for the same comparison.
    test::expect_close(s.w, rw, 1e-6, what + ": master");
    test::expect_close(s.m, rm, 1e-6, what + ": m");
    test::expect_close(s.v, rv, 1e-6, what + ": v");
    // The bf16 copy written in the same pass is the f32 master rounded, exactly.
    int wrong = 0;
    for (size_t i = 0; i < s.w.size(); ++i) wrong += s.w16[i].bits != float_to_bf16(s.w[i]).bits;
    EXPECT_EQ(wrong, 0) << what << ": bf16 copies that are not the rounded master";
  }
}

TEST(CpuAdamW, TheBf16CopyRoundsAsFloatToBf16) {
  // A step that leaves the master as it is (no gradient, no moments, no decay) so the bf16 copy
  // sees chosen values: ties to even, subnormals (rounded, not flushed), infinities, NaN.
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Vec w = {1.0f + 1.0f / 256, 1.0f + 3.0f / 256, -2.5f, 1e-40f, -3e-39f, inf, -inf, nan,
           std::numeric_limits<float>::max(), 0.0f, -0.0f, 3.14159f};
  const int64_t n = int64_t(w.size());
  Vec g(w.size(), 0.0f), m(w.size(), 0.0f), v(w.size(), 0.0f);
  std::vector<bf16> w16(w.size());
  const Vec before = w;
  adamw_update(w.data(), w16.data(), g.data(), m.data(), v.data(), n,
               adamw_scalars({0.0f, 0.9f, 0.95f, 1e-8f, 0.0f, 1, 1.0f}, false));
  for (int64_t i = 0; i < n; ++i) {
    const size_t j = size_t(i);
    if (std::isnan(before[j])) {
      EXPECT_TRUE(std::isnan(w[j]));
      EXPECT_TRUE(std::isnan(to_float(w16[j]))) << "NaN stays NaN";
      continue;
    }
    EXPECT_EQ(w[j], before[j]) << i;
    EXPECT_EQ(w16[j].bits, float_to_bf16(before[j]).bits) << i << ": " << before[j];
  }
}

TEST(CpuSumSquares, BitIdenticalAcrossThreadCountsAndCloseToDouble) {
  const Vec x = test::random_normal(size_t(kN) * 3, 301);
  const int saved = omp_get_max_threads();
  for (int64_t n : {int64_t(0), int64_t(1), int64_t(17), int64_t(63), int64_t(64), int64_t(1000),
                    int64_t(x.size())}) {
    double exact = 0.0;
    for (int64_t i = 0; i < n; ++i) exact += double(x[size_t(i)]) * double(x[size_t(i)]);
    omp_set_num_threads(1);
    const double first = sum_squares(x.data(), n);
    // Squares of floats are exact in double and the partial sums are double: only the additions
    // round, far inside test_reference_backend.cpp's 1e-6 relative.
    EXPECT_NEAR(first, exact, 1e-10 * exact) << n;
    for (int threads : {1, 2, 3, 5}) {
      omp_set_num_threads(threads);
      const double again = sum_squares(x.data(), n);
      EXPECT_EQ(std::memcmp(&again, &first, sizeof first), 0)
          << n << " elements, " << threads << " threads";
    }
  }
  omp_set_num_threads(saved);
}

}  // namespace
}  // namespace mt
