#include <gtest/gtest.h>

#include <omp.h>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <random>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "kernels/cpu/gemm.h"

namespace mt {
namespace {

// Reference product in double for C = op(A) op(B).
std::vector<double> reference(const std::vector<float>& A, const std::vector<float>& B, int M,
                              int N, int K, bool ta, bool tb) {
  std::vector<double> C(size_t(M) * N, 0.0);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double s = 0;
      for (int k = 0; k < K; ++k) {
        double a = ta ? A[size_t(k) * M + i] : A[size_t(i) * K + k];
        double b = tb ? B[size_t(j) * K + k] : B[size_t(k) * N + j];
        s += a * b;
      }
      C[size_t(i) * N + j] = s;
    }
  return C;
}

TEST(Gemm, F32AllTransposesAndAccumulate) {
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  const int M = 37, N = 71, K = 83;  // every side past gemm_skinny.h's limit: oneDNN's products
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      std::vector<float> A(M * K), B(K * N), C(M * N, 1.0f);
      for (auto& x : A) x = nd(rng);
      for (auto& x : B) x = nd(rng);
      GemmArgs g;
      g.M = M, g.N = N, g.K = K, g.trans_a = ta, g.trans_b = tb;
      g.A = A.data(), g.lda = ta ? M : K;
      g.B = B.data(), g.ldb = tb ? K : N;
      g.C = C.data(), g.ldc = N;
      g.alpha = 0.5f, g.accumulate = true;
      gemm(g);
      auto R = reference(A, B, M, N, K, ta, tb);
      for (int i = 0; i < M * N; ++i) ASSERT_NEAR(C[i], 1.0 + 0.5 * R[i], 1e-4) << ta << tb << i;
    }
}

TEST(Gemm, Bf16InputsF32Output) {
  std::mt19937 rng(2);
  std::normal_distribution<float> nd;
  const int M = 72, N = 80, K = 96;  // past gemm_skinny.h's limit
  std::vector<float> A(M * K), B(N * K);
  for (auto& x : A) x = to_float(float_to_bf16(nd(rng)));  // exactly representable in bf16
  for (auto& x : B) x = to_float(float_to_bf16(nd(rng)));
  std::vector<bf16> Ab(A.size()), Bb(B.size());
  convert(Ab.data(), A.data(), A.size());
  convert(Bb.data(), B.data(), B.size());
  // dW[N,K] += dy^T x with dy = A^T... use A as dy [M,N]? shapes: dy [M, out=N], x [M, in=K]
  std::vector<float> dy(M * N);
  for (auto& x : dy) x = to_float(float_to_bf16(nd(rng)));
  std::vector<bf16> dyb(dy.size());
  convert(dyb.data(), dy.data(), dy.size());
  std::vector<float> dW(N * K, 0.0f);
  linear_backward_weight<bf16>(dW.data(), dyb.data(), Ab.data(), M, N, K);
  auto R = reference(dy, A, N, K, M, /*ta=*/true, /*tb=*/false);
  for (int i = 0; i < N * K; ++i) ASSERT_NEAR(dW[i], R[i], 1e-3 * (1 + std::abs(R[i]))) << i;

  // y = x W^T in bf16: output rounded to bf16, so compare at bf16 precision.
  std::vector<bf16> y(M * N);
  linear_forward<bf16>(y.data(), Ab.data(), Bb.data(), M, N, K);
  auto Y = reference(A, B, M, N, K, false, true);
  for (int i = 0; i < M * N; ++i) ASSERT_NEAR(to_float(y[i]), Y[i], 1e-2 * (1 + std::abs(Y[i])));

  int64_t before = gemm_primitives_created();
  linear_forward<bf16>(y.data(), Ab.data(), Bb.data(), M, N, K);
  EXPECT_EQ(gemm_primitives_created(), before) << "same shape must reuse the cached primitive";
}

// A mixture of experts' GEMMs have as many rows as tokens chose the expert: a count that changes
// every step. Each count is computed exactly, as the rows of C (the forward and the input
// gradient: x [rows, in] times W or W^T) and as the reduction of a weight gradient (dy^T x over
// the rows), with and without accumulation; and the counts share a bounded number of primitives
// instead of making one each (the leading dimensions are the layer's, fixed, as in the model).
TEST(Gemm, VaryingRowCountsAreExactAndShareBoundedPrimitives) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  const int N = 72, K = 80;  // past gemm_skinny.h's limit: oneDNN's products, cut into cached sizes
  const int64_t before = gemm_primitives_created();
  int counts = 0;
  for (int rows = 1; rows <= 700; rows += 13, ++counts)
    for (int tb = 0; tb < 2; ++tb) {
      std::vector<float> A(size_t(rows) * K), B(size_t(K) * N), C(size_t(rows) * N, 1.0f);
      for (auto& x : A) x = nd(rng);
      for (auto& x : B) x = nd(rng);
      GemmArgs g;  // C [rows, N] = 0.5 A op(B) (+ C)
      g.M = rows, g.N = N, g.K = K, g.trans_b = tb;
      g.A = A.data(), g.lda = K;
      g.B = B.data(), g.ldb = tb ? K : N;
      g.C = C.data(), g.ldc = N;
      g.alpha = 0.5f, g.accumulate = tb == 1;
      gemm(g);
      const auto R = reference(A, B, rows, N, K, false, tb);
      for (size_t i = 0; i < C.size(); ++i)
        ASSERT_NEAR(C[i], (g.accumulate ? 1.0 : 0.0) + 0.5 * R[i], 1e-4 * (1 + std::abs(R[i])))
            << "rows " << rows << " tb " << tb << " element " << i;
      // D [K, N] = A^T E (+ D): the reduction over the rows.
      std::vector<float> E(size_t(rows) * N), D(size_t(K) * N, 2.0f);
      for (auto& x : E) x = nd(rng);
      GemmArgs w;
      w.M = K, w.N = N, w.K = rows, w.trans_a = true;
      w.A = A.data(), w.lda = K;
      w.B = E.data(), w.ldb = N;
      w.C = D.data(), w.ldc = N;
      w.accumulate = tb == 1;
      gemm(w);
      const auto RD = reference(A, E, K, N, rows, /*ta=*/true, /*tb=*/false);
      for (size_t i = 0; i < D.size(); ++i)
        ASSERT_NEAR(D[i], (w.accumulate ? 2.0 : 0.0) + RD[i], 1e-4 * (1 + std::abs(RD[i])))
            << "reduction over " << rows << " rows, element " << i;
    }
  // Four kinds of call (two products, with and without accumulation); each about 700 / 256 +
  // 2 x 256 / 16 shapes (a multiple of 256, of 16, the rest), not one per count (54 here).
  const int64_t made = gemm_primitives_created() - before;
  EXPECT_LE(made, 4 * (2 + 15 + 15)) << counts << " row counts";
}

}  // namespace
}  // namespace mt

namespace mt {
namespace {

// The bf16 GEMM of a CPU without a oneDNN bf16 matmul (widened to f32) gives what the native one
// gives, to the order of its f32 partial sums: every case of the model's (transposes, alpha,
// accumulation into f32 and into bf16). On such a CPU both runs take the widened path.
TEST(Gemm, Bf16WidenedToF32IsTheNativeBf16Gemm) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  const int64_t M = 37, N = 70, K = 300;  // past gemm_skinny.h's limit
  std::vector<bf16> A(size_t(M * K)), B(size_t(K * N)), C0(size_t(M * N));
  for (auto& x : A) x = float_to_bf16(nd(rng));
  for (auto& x : B) x = float_to_bf16(nd(rng));
  for (auto& x : C0) x = float_to_bf16(nd(rng));
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (int acc = 0; acc < 2; ++acc)
        for (DType out : {DType::f32, DType::bf16}) {
          std::vector<float> f[2];
          std::vector<bf16> h[2];
          for (int widen = 0; widen < 2; ++widen) {
            force_widened_bf16_gemm(widen == 1);
            f[widen].assign(size_t(M * N), 0.25f);
            h[widen] = C0;
            GemmArgs g;
            g.M = M, g.N = N, g.K = K, g.trans_a = ta, g.trans_b = tb;
            g.A = A.data(), g.lda = ta ? M : K;
            g.B = B.data(), g.ldb = tb ? K : N;
            g.C = out == DType::f32 ? static_cast<void*>(f[widen].data()) : static_cast<void*>(h[widen].data());
            g.ldc = N, g.ab_type = DType::bf16, g.c_type = out, g.alpha = 0.5f, g.accumulate = acc;
            gemm(g);
          }
          force_widened_bf16_gemm(false);
          for (int64_t i = 0; i < M * N; ++i) {
            const float native = out == DType::f32 ? f[0][size_t(i)] : to_float(h[0][size_t(i)]);
            const float wide = out == DType::f32 ? f[1][size_t(i)] : to_float(h[1][size_t(i)]);
            // f32 sums of 300 products in another order; a bf16 output may round to a neighbour.
            const float tol = out == DType::f32 ? 1e-4f * (1 + std::fabs(native)) : 8e-3f * (1 + std::fabs(native));
            ASSERT_NEAR(wide, native, tol) << "ta " << ta << " tb " << tb << " acc " << acc << " out "
                                            << (out == DType::f32 ? "f32" : "bf16") << " element " << i;
          }
        }
}


// A group of independent GEMMs (an MoE projection's experts), run side by side one product a
// thread: every case the model issues (the forward's x W^T, the input gradient's dy W, the weight
// gradient's dW += dy^T x; f32 and bf16, bf16 and f32 outputs, accumulating and not), uneven sizes
// from 1 row up. Each result equals the same product alone on one thread (bit for bit where both
// take oneDNN's sgemm: a widened bf16 product), the float64 product to rounding, and the same bits
// on a second run; a failing product's error leaves the call (none escapes the parallel region).
TEST(GemmGroup, EqualsEachProductAloneAndRepeatsBitForBit) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  const std::vector<int64_t> rows = {37, 1, 130, 8, 64, 3, 99};
  const int64_t N = 72, K = 80;  // past gemm_skinny.h's limit (a weight gradient's few rows are skinny)
  for (DType ab : {DType::f32, DType::bf16})
    for (DType out : {DType::f32, DType::bf16}) {
      if (ab == DType::f32 && out == DType::bf16) continue;
      for (int kind = 0; kind < 3; ++kind) {  // forward (tb), input gradient, weight gradient (ta)
        const bool ta = kind == 2, tb = kind == 0, acc = kind != 0;
        const size_t ab_size = dtype_size(ab), c_size = dtype_size(out);
        std::vector<std::vector<float>> As, Bs;  // exact in bf16
        std::vector<std::vector<char>> Ab, Bb, C0;
        std::vector<GemmArgs> g;
        for (int64_t m : rows) {
          const int64_t M = ta ? N : m, Kp = ta ? m : K, Nn = ta ? K : N;
          As.emplace_back(size_t(M * Kp)), Bs.emplace_back(size_t(Kp * Nn));
          for (auto& x : As.back()) x = to_float(float_to_bf16(nd(rng)));
          for (auto& x : Bs.back()) x = to_float(float_to_bf16(nd(rng)));
          auto stored = [&](const std::vector<float>& v) {
            std::vector<char> b(v.size() * ab_size);
            if (ab == DType::bf16) convert(reinterpret_cast<bf16*>(b.data()), v.data(), v.size());
            else std::memcpy(b.data(), v.data(), b.size());
            return b;
          };
          Ab.push_back(stored(As.back())), Bb.push_back(stored(Bs.back()));
          std::vector<char> c(size_t(M * Nn) * c_size);
          for (int64_t i = 0; i < M * Nn; ++i) {
            const float v = to_float(float_to_bf16(nd(rng)));
            if (out == DType::bf16) reinterpret_cast<bf16*>(c.data())[i] = float_to_bf16(v);
            else reinterpret_cast<float*>(c.data())[i] = v;
          }
          C0.push_back(c);
          GemmArgs a;
          a.M = M, a.N = Nn, a.K = Kp, a.trans_a = ta, a.trans_b = tb;
          a.lda = ta ? M : Kp, a.ldb = tb ? Kp : Nn, a.ldc = Nn;
          a.ab_type = ab, a.c_type = out, a.alpha = 0.75f, a.accumulate = acc;
          g.push_back(a);
        }
        // op(B) is [K, N]: stored [N, K] when transposed, which the fill above does not care about.
        auto run = [&](bool group) {
          std::vector<std::vector<char>> C = C0;
          std::vector<GemmArgs> args = g;
          for (size_t i = 0; i < args.size(); ++i) args[i].A = Ab[i].data(), args[i].B = Bb[i].data(), args[i].C = C[i].data();
          if (group) {
            gemm_group(args);
          } else {
            const int threads = omp_get_max_threads();
            omp_set_num_threads(1);
            for (const GemmArgs& a : args) gemm(a);
            omp_set_num_threads(threads);
          }
          return C;
        };
        const auto grouped = run(true), again = run(true), alone = run(false);
        const std::string what = std::string(ab == DType::f32 ? "f32" : "bf16") + " -> " +
                                 (out == DType::f32 ? "f32" : "bf16") + ", kind " + std::to_string(kind);
        for (size_t i = 0; i < g.size(); ++i) {
          ASSERT_EQ(grouped[i], again[i]) << what << ": product " << i << " differs run to run";
          if (ab == DType::bf16 && !bf16_gemm_native()) {  // both oneDNN's sgemm on one thread
            ASSERT_EQ(grouped[i], alone[i]) << what << ": product " << i << " differs from itself alone";
          }
          const GemmArgs& a = g[i];
          const auto R = reference(As[i], Bs[i], int(a.M), int(a.N), int(a.K), ta, tb);
          for (int64_t e = 0; e < a.M * a.N; ++e) {
            auto at = [&](const std::vector<char>& c) {
              return out == DType::bf16 ? to_float(reinterpret_cast<const bf16*>(c.data())[e])
                                        : reinterpret_cast<const float*>(c.data())[e];
            };
            const double want = 0.75 * R[size_t(e)] + (acc ? at(C0[i]) : 0.0);
            const double tol = out == DType::bf16 ? 8e-3 * (1 + std::fabs(want)) : 1e-4 * (1 + std::fabs(want));
            ASSERT_NEAR(at(grouped[i]), want, tol) << what << ": product " << i << " element " << e;
          }
        }
      }
    }
  GemmArgs bad = {};  // no rows: gemm()'s error, thrown by whichever thread ran it
  std::vector<float> x(32);
  GemmArgs good;
  good.M = good.N = good.K = 4, good.lda = good.ldb = good.ldc = 4;
  good.A = good.B = x.data(), good.C = x.data() + 16;
  bad.N = bad.K = 4, bad.A = bad.B = bad.C = x.data();
  const std::vector<GemmArgs> group = {good, bad, good};
  EXPECT_THROW(gemm_group(group), std::exception);
}

}  // namespace
}  // namespace mt
