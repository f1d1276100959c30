// A mixture of experts' row moves (Backend::gather_rows, combine_rows, combine_rows_backward) on
// each available backend (the CPU always; CUDA when built and a GPU answers, and in the
// CPU-executed build) against the reference backend: f32 and bf16 and the mixed out/src dtypes,
// k = 1, 2, 4, dropped slots, accumulate on and off, empty weights; a gather past src's rows gives
// zeros, the backward leaves the rows no slot names as they were, results repeat bit for bit, and
// misuse is one error line naming the op. The reference's backward is checked against central
// finite differences of its forward.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "available_backends.h"
#include "backend/reference_backend.h"
#include "backend_tensors.h"
#include "core/bf16.h"
#include "core/error.h"
#include "error_of.h"
#include "finite_diff.h"

namespace mt {
namespace {

using Vec = std::vector<float>;
using Side = test::BackendTensors;
using test::random_normal;

constexpr double kF32 = 1e-6;  // f32 results: a few float roundings of short sums

// One bf16 ulp of x (2^-7 of its binade; the smallest normal's for zero and subnormals).
double bf16_ulp(double x) {
  const double a = std::max(std::fabs(x), std::ldexp(1.0, -126));
  return std::ldexp(1.0, std::ilogb(a) - 7);
}

// bf16 results against the reference's, which rounds once from double: within one ulp of the
// larger of the two, plus 1e-6 of the tensor's largest magnitude for the f32 roundings of a sum
// that cancels far below its terms. f32 results: test::expect_close at kF32.
void expect_matches(const Vec& actual, const Vec& expected, DType dt, const std::string& what) {
  if (dt == DType::f32) return test::expect_close(actual, expected, kF32, what);
  ASSERT_EQ(actual.size(), expected.size()) << what;
  double scale = 0.0;
  for (float e : expected) scale = std::max(scale, double(std::fabs(e)));
  int reported = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const double a = actual[i], e = expected[i];
    if (std::fabs(a - e) > bf16_ulp(std::max(std::fabs(a), std::fabs(e))) + 1e-6 * scale &&
        reported++ < 5)
      ADD_FAILURE() << what << " [" << i << "]: " << a << " vs reference " << e;
  }
}

void expect_identical(const Vec& a, const Vec& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_EQ(std::memcmp(&a[i], &b[i], sizeof(float)), 0) << what << " [" << i << "]";
}

// A routing of N tokens with k choices each onto the M = N k + extra rows of an expert-ordered
// tensor: the slots are a shuffled permutation of rows (the rows past N k never named), and every
// `drop_every`-th slot dropped (-1; 0: none), so that its row is not named either.
std::vector<int32_t> make_slots(int64_t N, int64_t k, int64_t extra, int drop_every, uint32_t seed) {
  std::vector<int32_t> rows(size_t(N * k + extra));
  std::iota(rows.begin(), rows.end(), 0);
  std::mt19937 rng(seed);
  std::shuffle(rows.begin(), rows.end(), rng);
  rows.resize(size_t(N * k));
  if (drop_every > 0)
    for (size_t i = 0; i < rows.size(); i += size_t(drop_every)) rows[i] = -1;
  return rows;
}

std::string name(DType t) { return dtype_name(t); }

// The backend under test is the parameter; one that this build or machine lacks is skipped, the
// skip message saying why.
class MoeRows : public test::BackendParamTest {};

TEST_P(MoeRows, GatherMatchesReference) {
  // C odd: a bf16 row is not a whole number of 4-byte words. Indices past either end give zeros.
  const int64_t R = 11, C = 37;
  const std::vector<int32_t> rows = {3, 0, 10, 3, -1, 7, 11, 5, 1 << 30, 2, 9};
  const int64_t M = int64_t(rows.size());
  const Vec src = random_normal(size_t(R * C), 1), before = random_normal(size_t(M * C), 2);
  for (DType dt : {DType::f32, DType::bf16}) {
    Vec got[2];
    int s = 0;
    for (Backend* be : {&tested(), &reference_backend()}) {
      Side side(*be);
      const Tensor S = side.make(dt, R, C, src), D = side.make(dt, M, C, before);
      be->gather_rows(D, S, side.make_i32(rows));
      got[s++] = side.get(D);
    }
    const std::string what = "gather_rows " + name(dt);
    expect_identical(got[0], got[1], what);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t c = 0; c < C; ++c) {
        const float want = rows[size_t(i)] >= 0 && rows[size_t(i)] < R
                               ? (dt == DType::f32 ? src[size_t(rows[size_t(i)] * C + c)]
                                                   : to_float(float_to_bf16(src[size_t(rows[size_t(i)] * C + c)])))
                               : 0.0f;
        ASSERT_EQ(got[0][size_t(i * C + c)], want) << what << " row " << i << " col " << c;
      }
  }
}

TEST_P(MoeRows, GatherMovesI32Rows) {
  // Any dtype but NF4 moves (the reference takes floats only, so this one is checked by hand).
  const int64_t R = 4, C = 3;
  Side side(tested());
  const std::vector<int32_t> src = {0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32};
  const std::vector<int32_t> rows = {2, -1, 0, 4};
  const Tensor S = side.make_i32(src).view(R, C);
  const Tensor D = side.make_i32(std::vector<int32_t>(rows.size() * C, 99)).view(int64_t(rows.size()), C);
  tested().gather_rows(D, S, side.make_i32(rows));
  std::vector<int32_t> got(rows.size() * C);
  tested().copy_to_host(got.data(), D);
  EXPECT_EQ(got, (std::vector<int32_t>{20, 21, 22, 0, 0, 0, 0, 1, 2, 0, 0, 0}));
}

TEST_P(MoeRows, CombineMatchesReference) {
  const int64_t N = 13, C = 37;
  for (int64_t k : {1, 2, 4}) {
    const int64_t M = N * k + 3;
    const std::vector<int32_t> slots = make_slots(N, k, 3, 5, uint32_t(10 + k));
    const Vec src = random_normal(size_t(M * C), uint32_t(20 + k)),
              out0 = random_normal(size_t(N * C), uint32_t(30 + k)),
              w = random_normal(size_t(N * k), uint32_t(40 + k), 0.5f);
    for (DType ot : {DType::f32, DType::bf16})
      for (DType st : {DType::f32, DType::bf16})
        for (bool acc : {false, true})
          for (bool weighted : {true, false}) {
            Vec got[2];
            int s = 0;
            for (Backend* be : {&tested(), &reference_backend()}) {
              Side side(*be);
              const Tensor O = side.make(ot, N, C, out0), S = side.make(st, M, C, src);
              const Tensor W = weighted ? side.make(DType::f32, N * k, 1, w) : Tensor{};
              be->combine_rows(O, S, side.make_i32(slots), W, k, acc);
              got[s++] = side.get(O);
            }
            expect_matches(got[0], got[1], ot,
                           "combine_rows " + name(ot) + " <- " + name(st) + " k " +
                               std::to_string(k) + " accumulate " + std::to_string(acc) +
                               (weighted ? " weighted" : " unweighted"));
          }
  }
}

TEST_P(MoeRows, CombineBackwardMatchesReference) {
  const int64_t N = 13, C = 37;
  for (int64_t k : {1, 2, 4}) {
    const int64_t M = N * k + 3;
    const std::vector<int32_t> slots = make_slots(N, k, 3, 4, uint32_t(50 + k));
    const Vec src = random_normal(size_t(M * C), uint32_t(60 + k)),
              dout = random_normal(size_t(N * C), uint32_t(70 + k)),
              w = random_normal(size_t(N * k), uint32_t(80 + k), 0.5f),
              dsrc0 = random_normal(size_t(M * C), uint32_t(90 + k), 3.0f);
    // The rows no kept slot names: left as they were.
    std::vector<bool> named(size_t(M), false);
    for (int32_t r : slots)
      if (r >= 0) named[size_t(r)] = true;
    for (DType ot : {DType::f32, DType::bf16})
      for (DType st : {DType::f32, DType::bf16}) {
        Vec ds[2], dw[2];
        int s = 0;
        for (Backend* be : {&tested(), &reference_backend()}) {
          Side side(*be);
          const Tensor dO = side.make(ot, N, C, dout), S = side.make(st, M, C, src);
          const Tensor dS = side.make(st, M, C, dsrc0), W = side.make(DType::f32, N * k, 1, w);
          const Tensor dW = side.make(DType::f32, N * k, 1, Vec(size_t(N * k), 5.0f));
          be->combine_rows_backward(dS, dW, dO, S, side.make_i32(slots), W, k);
          ds[s] = side.get(dS), dw[s++] = side.get(dW);
        }
        const std::string what = "combine_rows_backward " + name(ot) + " -> " + name(st) +
                                 " k " + std::to_string(k);
        expect_matches(ds[0], ds[1], st, what + " dsrc");
        expect_matches(dw[0], dw[1], DType::f32, what + " dweights");
        for (size_t i = 0; i < slots.size(); ++i) {
          if (slots[i] >= 0) continue;
          EXPECT_EQ(dw[0][i], 0.0f) << what << " dweights of dropped slot " << i;
        }
        Side host(tested());
        const Vec before = host.get(host.make(st, M, C, dsrc0));  // dsrc0 as st holds it
        for (int64_t r = 0; r < M; ++r) {
          if (named[size_t(r)]) continue;
          for (int64_t c = 0; c < C; ++c)
            ASSERT_EQ(ds[0][size_t(r * C + c)], before[size_t(r * C + c)])
                << what << ": row " << r << ", named by no slot, was written";
        }
      }
  }
}

TEST_P(MoeRows, ResultsRepeatBitForBit) {
  // Rows wider than a block, k = 4, drops: each run of each op gives the same bits.
  const int64_t N = 24, k = 4, C = 300, M = N * k + 5;
  const std::vector<int32_t> slots = make_slots(N, k, 5, 7, 100);
  const Vec src = random_normal(size_t(M * C), 101), dout = random_normal(size_t(N * C), 102),
            w = random_normal(size_t(N * k), 103, 0.5f);
  for (DType dt : {DType::f32, DType::bf16}) {
    Vec out[2], ds[2], dw[2];
    for (int run = 0; run < 2; ++run) {
      Side side(tested());
      const Tensor S = side.make(dt, M, C, src), W = side.make(DType::f32, N * k, 1, w),
                   sl = side.make_i32(slots);
      const Tensor O = side.make(dt, N, C, dout);
      tested().combine_rows(O, S, sl, W, k, true);
      const Tensor dS = side.make(dt, M, C, Vec(size_t(M * C), 0.0f)),
                   dW = side.make(DType::f32, N * k, 1), dO = side.make(dt, N, C, dout);
      tested().combine_rows_backward(dS, dW, dO, S, sl, W, k);
      out[run] = side.get(O), ds[run] = side.get(dS), dw[run] = side.get(dW);
    }
    expect_identical(out[0], out[1], "combine_rows " + name(dt));
    expect_identical(ds[0], ds[1], "combine_rows_backward dsrc " + name(dt));
    expect_identical(dw[0], dw[1], "combine_rows_backward dweights " + name(dt));
  }
}

TEST_P(MoeRows, MisuseIsOneErrorLineNamingTheOp) {
  const int64_t N = 4, k = 2, C = 8, M = N * k;
  Side side(tested());
  const Tensor out = side.make(DType::f32, N, C), src = side.make(DType::f32, M, C);
  const Tensor W = side.make(DType::f32, N * k, 1), dW = side.make(DType::f32, N * k, 1);
  const Tensor dS = side.make(DType::f32, M, C);
  const Tensor slots = side.make_i32(make_slots(N, k, 0, 0, 7));
  const Tensor short_slots = side.make_i32(std::vector<int32_t>(size_t(N * k - 1), 0));
  const Tensor out_i32 = side.make_i32(std::vector<int32_t>(size_t(N * C), 0)).view(N, C);
  const Tensor dS_bf16 = side.make(DType::bf16, M, C);
  Backend& be = tested();
  const auto expect_names = [](const std::string& msg, const std::string& op) {
    EXPECT_NE(msg.find(op), std::string::npos) << "'" << msg << "' does not name " << op;
  };
  expect_names(error_of([&] { be.combine_rows(out, src, short_slots, W, k, false); }), "combine_rows");
  expect_names(error_of([&] { be.combine_rows(out, src, slots, W, 0, false); }), "combine_rows");
  expect_names(error_of([&] { be.combine_rows(out_i32, src, slots, W, k, false); }), "combine_rows");
  expect_names(error_of([&] { be.combine_rows_backward(dS, dW, out, src, short_slots, W, k); }),
               "combine_rows_backward");
  expect_names(error_of([&] { be.combine_rows_backward(dS, dW, out, src, slots, W, 0); }),
               "combine_rows_backward");
  expect_names(error_of([&] { be.combine_rows_backward(dS, dW, out_i32, src, slots, W, k); }),
               "combine_rows_backward");
  expect_names(error_of([&] { be.combine_rows_backward(dS, dW, out, src, slots, Tensor{}, k); }),
               "combine_rows_backward");
  expect_names(error_of([&] { be.combine_rows_backward(dS_bf16, dW, out, src, slots, W, k); }),
               "combine_rows_backward");
  expect_names(error_of([&] { be.gather_rows(src, out, short_slots); }), "gather_rows");
  expect_names(error_of([&] { be.gather_rows(dS_bf16, src, slots); }), "gather_rows");
  // And the well-formed calls pass.
  EXPECT_EQ(error_of([&] { be.combine_rows(out, src, slots, W, k, false); }), "");
  EXPECT_EQ(error_of([&] { be.combine_rows(out, src, slots, Tensor{}, k, true); }), "");
  EXPECT_EQ(error_of([&] { be.combine_rows_backward(dS, dW, out, src, slots, W, k); }), "");
  EXPECT_EQ(error_of([&] { be.gather_rows(src, src, slots); }), "");
}

INSTANTIATE_TEST_SUITE_P(Backends, MoeRows, ::testing::ValuesIn(test::comparison_backend_names()),
                         [](const auto& info) { return info.param; });

// The oracle's backward against central differences of L = sum(g * combine_rows(src, w)) in f32:
// dsrc and dweights, with dropped slots and rows no slot names (whose gradient is 0).
TEST(MoeRowsReference, BackwardMatchesFiniteDifferences) {
  Backend& ref = reference_backend();
  const int64_t N = 5, k = 2, C = 6, M = N * k + 2;
  const std::vector<int32_t> slots = make_slots(N, k, 2, 3, 200);
  const Vec src = random_normal(size_t(M * C), 201), w = random_normal(size_t(N * k), 202),
            g = random_normal(size_t(N * C), 203);
  Side side(ref);
  const Tensor sl = side.make_i32(slots);
  const auto loss = [&](const Vec& s, const Vec& weights) {
    Side t(ref);
    const Tensor O = t.make(DType::f32, N, C);
    ref.combine_rows(O, t.make(DType::f32, M, C, s), sl, t.make(DType::f32, N * k, 1, weights), k,
                     false);
    return test::projection(t.get(O), g);
  };
  const Tensor dS = side.make(DType::f32, M, C, Vec(size_t(M * C), 0.0f));
  const Tensor dW = side.make(DType::f32, N * k, 1);
  ref.combine_rows_backward(dS, dW, side.make(DType::f32, N, C, g), side.make(DType::f32, M, C, src),
                            sl, side.make(DType::f32, N * k, 1, w), k);
  test::expect_grad_near(side.get(dS),
                         test::central_diff([&](const Vec& s) { return loss(s, w); }, src, 1e-2f),
                         "dsrc");
  test::expect_grad_near(side.get(dW),
                         test::central_diff([&](const Vec& x) { return loss(src, x); }, w, 1e-2f),
                         "dweights");
}

}  // namespace
}  // namespace mt
