// The fused RMSNorm ops (Backend::residual_rmsnorm_forward, rmsnorm_backward_convert) on every
// available backend: against the reference (double accumulation) to the usual tolerances, and
// against the same backend's unfused pair (residual_add + rmsnorm_forward, rmsnorm_backward +
// convert) bit for bit, which is what lets the block use them without moving any run's numbers.
// The reference's pair is checked against central finite differences of its forward.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "available_backends.h"
#include "backend/reference_backend.h"
#include "backend_tensors.h"
#include "core/error.h"
#include "finite_diff.h"

namespace mt {
namespace {

using Vec = std::vector<float>;
using Side = test::BackendTensors;
using test::expect_close;
using test::random_normal;

constexpr double kF32 = 1e-5, kBf16 = 3.0 / 256;  // as test_reference_backend.cpp
double tol(DType t) { return t == DType::bf16 ? kBf16 : kF32; }

void expect_same_bits(const Vec& a, const Vec& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << what << " [" << i << "]";
}

struct Shape {
  int64_t N, C;
};
// Odd widths; 600 columns are more than one pass of a GPU block's threads over the row; 64 x 600
// is over the CPU kernels' threading threshold (the weight gradient's column split, then the rows).
constexpr Shape kShapes[] = {{7, 45}, {5, 600}, {64, 600}};

class BackendOpsFusedNorm : public test::BackendParamTest {};

TEST_P(BackendOpsFusedNorm, ResidualRmsNormMatchesReferenceAndTheUnfusedPair) {
  for (const Shape& sh : kShapes)
    for (DType dt : {DType::f32, DType::bf16})
      for (float offset : {0.0f, 1.0f})  // 1: Gemma's (1 + w)
        for (bool in_place : {false, true}) {
          const int64_t N = sh.N, C = sh.C;
          const Vec x = random_normal(N * C, 11), d = random_normal(N * C, 12), w = random_normal(C, 13);
          const std::string what = std::string("residual_rmsnorm_forward ") + dtype_name(dt) + " " +
                                   std::to_string(N) + "x" + std::to_string(C) + " offset " +
                                   std::to_string(offset) + (in_place ? " in place" : "");
          // fused on the backend under test and on the reference, then the pair on the tested one
          Vec y[3], out[3], rstd[3];
          for (int run = 0; run < 3; ++run) {
            Backend& be = run == 1 ? reference_backend() : tested();
            Side side(be);
            Tensor X = side.make(DType::f32, N, C, x), D = side.make(dt, N, C, d), W = side.make(DType::f32, 1, C, w);
            Tensor Y = in_place ? X : side.make(DType::f32, N, C), O = side.make(dt, N, C),
                   R = side.make(DType::f32, 1, N);
            if (run < 2) {
              be.residual_rmsnorm_forward(Y, O, R, X, D, W, 1e-5f, offset);
            } else {
              be.residual_add(Y, X, D);
              be.rmsnorm_forward(O, R, Y, W, 1e-5f, offset);
            }
            y[run] = side.get(Y), out[run] = side.get(O), rstd[run] = side.get(R);
          }
          expect_close(y[0], y[1], kF32, what + " y");
          expect_close(out[0], out[1], tol(dt), what + " out");
          expect_close(rstd[0], rstd[1], kF32, what + " rstd");
          expect_same_bits(y[0], y[2], what + " y against the pair");
          expect_same_bits(out[0], out[2], what + " out against the pair");
          expect_same_bits(rstd[0], rstd[2], what + " rstd against the pair");
        }
}

// dx accumulates onto zeros or onto a gradient already there (the residual path's share); dx_c is
// a buffer of its own or dout itself (the block's case under sequence parallelism).
TEST_P(BackendOpsFusedNorm, RmsNormBackwardConvertMatchesReferenceAndTheUnfusedPair) {
  for (const Shape& sh : kShapes)
    for (DType dt : {DType::f32, DType::bf16})
      for (bool frozen : {false, true})
        for (bool accumulate : {false, true})
          for (bool onto_dout : {false, true}) {
            const int64_t N = sh.N, C = sh.C;
            const Vec x = random_normal(N * C, 21), w = random_normal(C, 22), g = random_normal(N * C, 23),
                      dx0 = accumulate ? random_normal(N * C, 24) : Vec(size_t(N * C), 0.0f),
                      dw0 = random_normal(C, 25);
            const std::string what = std::string("rmsnorm_backward_convert ") + dtype_name(dt) + " " +
                                     std::to_string(N) + "x" + std::to_string(C) + (frozen ? " frozen" : "") +
                                     (accumulate ? " accumulating" : "") + (onto_dout ? " onto dout" : "");
            Vec dx[3], dxc[3], dw[3];
            for (int run = 0; run < 3; ++run) {
              Backend& be = run == 1 ? reference_backend() : tested();
              Side side(be);
              Tensor X = side.make(DType::f32, N, C, x), W = side.make(DType::f32, 1, C, w);
              Tensor R = side.make(DType::f32, 1, N);
              Tensor O = side.make(dt, N, C);
              be.rmsnorm_forward(O, R, X, W, 1e-5f, 0.5f);  // rstd as the forward saves it
              Tensor G = side.make(dt, N, C, g), dX = side.make(DType::f32, N, C, dx0);
              Tensor dW = frozen ? Tensor{} : side.make(DType::f32, 1, C, dw0);
              Tensor dXc = onto_dout ? G : side.make(dt, N, C);
              if (run < 2) {
                be.rmsnorm_backward_convert(dX, dXc, dW, G, X, W, R, 0.5f);
              } else {
                be.rmsnorm_backward(dX, dW, G, X, W, R, 0.5f);
                be.convert(dXc, dX);
              }
              dx[run] = side.get(dX), dxc[run] = side.get(dXc);
              if (!frozen) dw[run] = side.get(dW);
            }
            expect_close(dx[0], dx[1], kF32, what + " dx");
            expect_close(dxc[0], dxc[1], tol(dt), what + " dx_c");
            expect_close(dw[0], dw[1], kF32, what + " dw");
            expect_same_bits(dx[0], dx[2], what + " dx against the pair");
            expect_same_bits(dxc[0], dxc[2], what + " dx_c against the pair");
            expect_same_bits(dw[0], dw[2], what + " dw against the pair");
          }
}

TEST_P(BackendOpsFusedNorm, MismatchedDtypesAreRefusedInOneLine) {
  Side side(tested());
  const int64_t N = 3, C = 8;
  Tensor X = side.make(DType::f32, N, C), W = side.make(DType::f32, 1, C), R = side.make(DType::f32, 1, N);
  Tensor O = side.make(DType::bf16, N, C), D = side.make(DType::f32, N, C), Y = side.make(DType::f32, N, C);
  try {
    tested().residual_rmsnorm_forward(Y, O, R, X, D, W, 1e-5f);
    ADD_FAILURE() << "a delta of another dtype than out was accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("residual_rmsnorm_forward"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
  Tensor G = side.make(DType::bf16, N, C), dX = side.make(DType::f32, N, C), dXc = side.make(DType::f32, N, C);
  EXPECT_THROW(tested().rmsnorm_backward_convert(dX, dXc, Tensor{}, G, X, W, R), Error);
}

INSTANTIATE_TEST_SUITE_P(Backends, BackendOpsFusedNorm, ::testing::ValuesIn(test::comparison_backend_names()),
                         [](const auto& info) { return info.param; });

// The block's pair on the reference: L = <r1, y> + <r2, out> with y = x + delta and out =
// rmsnorm(y). Its gradient with respect to x (and delta) is r1 + the norm's input gradient for r2:
// rmsnorm_backward_convert with dx starting at r1 and dout = r2 must give it, in dx and in dx_c.
TEST(ReferenceBackend, ResidualRmsNormPairMatchesFiniteDifferences) {
  const int64_t N = 3, C = 7;
  const Vec x = random_normal(N * C, 31), d = random_normal(N * C, 32), w = random_normal(C, 33),
            r1 = random_normal(N * C, 34), r2 = random_normal(N * C, 35);
  Backend& be = reference_backend();
  auto loss = [&](const Vec& xv, const Vec& dv, const Vec& wv) {
    Side side(be);
    Tensor X = side.make(DType::f32, N, C, xv), D = side.make(DType::f32, N, C, dv);
    Tensor W = side.make(DType::f32, 1, C, wv), Y = side.make(DType::f32, N, C);
    Tensor O = side.make(DType::f32, N, C), R = side.make(DType::f32, 1, N);
    be.residual_rmsnorm_forward(Y, O, R, X, D, W, 1e-5f, 1.0f);
    return test::projection(side.get(Y), r1) + test::projection(side.get(O), r2);
  };
  Side side(be);
  Tensor X = side.make(DType::f32, N, C, x), D = side.make(DType::f32, N, C, d);
  Tensor W = side.make(DType::f32, 1, C, w), Y = side.make(DType::f32, N, C);
  Tensor O = side.make(DType::f32, N, C), R = side.make(DType::f32, 1, N);
  be.residual_rmsnorm_forward(Y, O, R, X, D, W, 1e-5f, 1.0f);
  Tensor dX = side.make(DType::f32, N, C, r1), dXc = side.make(DType::f32, N, C);
  Tensor G = side.make(DType::f32, N, C, r2), dW = side.make(DType::f32, 1, C);
  be.rmsnorm_backward_convert(dX, dXc, dW, G, Y, W, R, 1.0f);
  constexpr double kRel = 2e-3, kAbs = 3e-4;  // as the other finite-difference tests
  const std::vector<double> by_x = test::central_diff([&](const Vec& v) { return loss(v, d, w); }, x);
  test::expect_grad_near(side.get(dX), by_x, "dx", kRel, kAbs);
  test::expect_grad_near(side.get(dXc), by_x, "dx_c", kRel, kAbs);
  test::expect_grad_near(side.get(dX), test::central_diff([&](const Vec& v) { return loss(x, v, w); }, d),
                         "d delta", kRel, kAbs);
  test::expect_grad_near(side.get(dW), test::central_diff([&](const Vec& v) { return loss(x, d, v); }, w), "dw",
                         kRel, kAbs);
}

}  // namespace
}  // namespace mt
