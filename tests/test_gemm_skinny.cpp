// The direct kernels of skinny products (kernels/cpu/gemm_skinny.h): every layout they take, in
// every operand/result type, against the float64 product; the same bits on one thread and on
// two and run to run; products they do not cover left alone; and gemm() routing to them.
#include <gtest/gtest.h>

#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_skinny.h"

namespace mt {
namespace {

struct Case {
  int64_t M, N, K;
  bool ta, tb;
};

// The shapes a LoRA step and an MoE router issue (u = x A^T, y += u B^T, du = dy B, dB = dy^T u,
// dA = du^T x, dx += du A), at uneven sizes around the tiles' edges (6 rows, 16 and 8 columns, 4
// dot columns, 8 lanes of k), up to the limit.
const std::vector<Case> kCases = {
    // K small (the sum over a rank): every transpose
    {37, 83, 8, false, true}, {131, 29, 24, false, false}, {6, 16, 1, true, true}, {50, 100, 48, true, false},
    {1, 7, 5, false, false}, {13, 131, 3, false, true},
    // N small, A stored [M, K]: dot products along A's rows
    {101, 8, 77, false, true}, {33, 24, 200, false, false}, {7, 1, 9, false, true}, {64, 13, 96, false, false},
    {3, 48, 130, false, true},
    // op(A) = A^T with N small: C^T's tiles
    {77, 8, 150, true, false}, {130, 5, 97, true, true}, {17, 48, 70, true, false},
    // op(A) = A^T with M small, B stored [K, N]
    {24, 77, 150, true, false}, {1, 130, 66, true, false}, {48, 33, 81, true, false}, {7, 16, 200, true, false},
};

std::vector<double> reference(const std::vector<float>& A, const std::vector<float>& B, const Case& c, int64_t lda,
                              int64_t ldb) {
  std::vector<double> C(size_t(c.M * c.N), 0.0);
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = 0; j < c.N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < c.K; ++k) {
        const double a = c.ta ? A[size_t(k * lda + i)] : A[size_t(i * lda + k)];
        const double b = c.tb ? B[size_t(j * ldb + k)] : B[size_t(k * ldb + j)];
        s += a * b;
      }
      C[size_t(i * c.N + j)] = s;
    }
  return C;
}

// One product of case c in the given types: operands exact in bf16, stored with leading
// dimensions 3 past their widths (a view into a wider matrix); returns C's bytes.
struct Product {
  std::vector<float> A, B;  // the values, as floats
  std::vector<char> Ab, Bb, C0;
  int64_t lda, ldb, ldc;
};

Product make_product(const Case& c, DType ab, DType out, std::mt19937& rng) {
  std::normal_distribution<float> nd;
  Product p;
  const int64_t a_rows = c.ta ? c.K : c.M, a_cols = c.ta ? c.M : c.K;
  const int64_t b_rows = c.tb ? c.N : c.K, b_cols = c.tb ? c.K : c.N;
  p.lda = a_cols + 3, p.ldb = b_cols + 3, p.ldc = c.N + 3;
  p.A.assign(size_t(a_rows * p.lda), 0.0f), p.B.assign(size_t(b_rows * p.ldb), 0.0f);
  for (auto& x : p.A) x = to_float(float_to_bf16(nd(rng)));
  for (auto& x : p.B) x = to_float(float_to_bf16(nd(rng)));
  auto stored = [&](const std::vector<float>& v) {
    std::vector<char> b(v.size() * dtype_size(ab));
    if (ab == DType::bf16) convert(reinterpret_cast<bf16*>(b.data()), v.data(), v.size());
    else std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  p.Ab = stored(p.A), p.Bb = stored(p.B);
  p.C0.assign(size_t(c.M * p.ldc) * dtype_size(out), 0);
  for (int64_t i = 0; i < c.M * p.ldc; ++i) {
    const float v = to_float(float_to_bf16(nd(rng)));
    if (out == DType::bf16) reinterpret_cast<bf16*>(p.C0.data())[i] = float_to_bf16(v);
    else reinterpret_cast<float*>(p.C0.data())[i] = v;
  }
  return p;
}

GemmArgs args_of(const Case& c, const Product& p, DType ab, DType out, bool acc, void* C) {
  GemmArgs g;
  g.M = c.M, g.N = c.N, g.K = c.K, g.trans_a = c.ta, g.trans_b = c.tb;
  g.A = p.Ab.data(), g.lda = p.lda, g.B = p.Bb.data(), g.ldb = p.ldb, g.C = C, g.ldc = p.ldc;
  g.ab_type = ab, g.c_type = out, g.alpha = 0.75f, g.accumulate = acc;
  return g;
}

float element(const std::vector<char>& c, DType out, int64_t i) {
  return out == DType::bf16 ? to_float(reinterpret_cast<const bf16*>(c.data())[i]) : reinterpret_cast<const float*>(c.data())[i];
}

TEST(GemmSkinny, EveryLayoutAndTypeMatchesFloat64AndIsTheSameOnOneAndTwoThreads) {
  std::mt19937 rng(11);
  const int threads = omp_get_max_threads();
  for (const Case& c : kCases)
    for (DType ab : {DType::f32, DType::bf16})
      for (DType out : {DType::f32, DType::bf16}) {
        if (ab == DType::f32 && out == DType::bf16) continue;
        for (int acc = 0; acc < 2; ++acc) {
          const Product p = make_product(c, ab, out, rng);
          const std::string what = std::to_string(c.M) + "x" + std::to_string(c.N) + "x" + std::to_string(c.K) +
                                   (c.ta ? " ta" : "") + (c.tb ? " tb" : "") + (ab == DType::bf16 ? " bf16" : " f32") +
                                   (out == DType::bf16 ? "->bf16" : "->f32") + (acc ? " acc" : "");
          std::vector<char> runs[3];
          for (int r = 0; r < 3; ++r) {  // two threads, one thread, two threads again
            omp_set_num_threads(r == 1 ? 1 : 2);
            runs[r] = p.C0;
            ASSERT_TRUE(skinny_gemm(args_of(c, p, ab, out, acc, runs[r].data()))) << what;
          }
          omp_set_num_threads(threads);
          ASSERT_EQ(runs[0], runs[1]) << what << ": one thread and two differ";
          ASSERT_EQ(runs[0], runs[2]) << what << ": differs run to run";
          const auto R = reference(p.A, p.B, c, p.lda, p.ldb);
          for (int64_t i = 0; i < c.M; ++i)
            for (int64_t j = 0; j < c.N + 3; ++j) {
              const int64_t e = i * p.ldc + j;
              if (j >= c.N) {  // past the product's columns: untouched
                ASSERT_EQ(element(runs[0], out, e), element(p.C0, out, e)) << what << " wrote past column N";
                continue;
              }
              const double want = 0.75 * R[size_t(i * c.N + j)] + (acc ? element(p.C0, out, e) : 0.0);
              const double tol = (out == DType::bf16 ? 8e-3 : 1e-5 * std::sqrt(double(c.K))) * (1 + std::fabs(want));
              ASSERT_NEAR(element(runs[0], out, e), want, tol) << what << " element " << i << "," << j;
            }
        }
      }
}

// A NaN or an infinity in an operand reaches C as in any product (the bf16 rounding keeps a NaN
// a NaN: eight lanes at once here, not float_to_bf16's one).
TEST(GemmSkinny, NanAndInfinityPropagateIntoBf16Results) {
  const int64_t M = 12, N = 32, K = 8;
  std::vector<bf16> A(size_t(M * K), float_to_bf16(1.0f)), B(size_t(K * N), float_to_bf16(0.5f)), C(size_t(M * N));
  A[0] = float_to_bf16(std::numeric_limits<float>::quiet_NaN());       // row 0: NaN
  A[size_t(K)] = float_to_bf16(std::numeric_limits<float>::infinity());  // row 1: +inf
  GemmArgs g;
  g.M = M, g.N = N, g.K = K, g.A = A.data(), g.lda = K, g.B = B.data(), g.ldb = N, g.C = C.data(), g.ldc = N;
  g.ab_type = g.c_type = DType::bf16;
  ASSERT_TRUE(skinny_gemm(g));
  for (int64_t j = 0; j < N; ++j) {
    EXPECT_TRUE(std::isnan(to_float(C[size_t(j)]))) << j;
    EXPECT_EQ(to_float(C[size_t(N + j)]), std::numeric_limits<float>::infinity()) << j;
    EXPECT_EQ(to_float(C[size_t(2 * N + j)]), 4.0f) << j;  // 8 x 1 x 0.5
  }
}

TEST(GemmSkinny, LeavesWhatItDoesNotCoverAndGemmRoutesToIt) {
  std::vector<float> A(200 * 200, 1.0f), B(200 * 200, 1.0f), C(200 * 200, 7.0f);
  GemmArgs g;
  g.A = A.data(), g.B = B.data(), g.C = C.data(), g.lda = g.ldb = g.ldc = 200;
  g.M = g.N = g.K = kSkinnyLimit + 1;  // nothing skinny
  EXPECT_FALSE(skinny_gemm(g));
  g.M = 8, g.trans_a = false;  // few rows of A stored [M, K]: oneDNN's
  EXPECT_FALSE(skinny_gemm(g));
  g.trans_a = true, g.trans_b = true;  // few rows of A^T against B^T: oneDNN's
  EXPECT_FALSE(skinny_gemm(g));
  for (float x : C) ASSERT_EQ(x, 7.0f);
  // gemm() takes the direct kernels for a skinny f32 product: no oneDNN primitive is made for it.
  const int64_t before = gemm_primitives_created();
  g.M = 150, g.N = 8, g.K = 180, g.trans_a = g.trans_b = false;
  gemm(g);
  EXPECT_EQ(gemm_primitives_created(), before);
  EXPECT_EQ(C[0], 180.0f);
}

}  // namespace
}  // namespace mt
