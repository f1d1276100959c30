// The cuBLASLt layout mapping (kernels/cuda/gemm_layout.h), checked without a GPU: an emulator
// applies the column-major product the mapping describes, exactly as cuBLASLt defines it, to host
// arrays, and the result must equal the reference matmul of the row-major operands, for every
// transpose, odd sizes, leading dimensions wider than the matrix and batches with strides.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/cuda/gemm_layout.h"
#include "kernels/reference/matmul.h"
#include "finite_diff.h"

namespace mt {
namespace {

using cuda::ColumnMajorGemm;
using cuda::ColumnMajorMatrix;
using cuda::RowMajorGemm;
using Vec = std::vector<float>;

// Element (r, c) of one batch entry of a column-major matrix, before its op.
float at(const Vec& x, const ColumnMajorMatrix& m, int64_t batch, int64_t r, int64_t c) {
  EXPECT_TRUE(r < m.rows && c < m.cols) << "read outside the described matrix";
  return x[size_t(batch * m.batch_stride + c * m.ld + r)];
}

// cuBLASLt's D = alpha op(A) op(B) + beta C, column-major, over the batch.
void emulate(const ColumnMajorGemm& g, const Vec& a, const Vec& b, Vec& c, float alpha,
             float beta) {
  // The op'd shapes must be the product's: op(a) [m, k], op(b) [k, n], c [m, n].
  ASSERT_EQ(g.a.transpose ? g.a.cols : g.a.rows, g.m);
  ASSERT_EQ(g.a.transpose ? g.a.rows : g.a.cols, g.k);
  ASSERT_EQ(g.b.transpose ? g.b.cols : g.b.rows, g.k);
  ASSERT_EQ(g.b.transpose ? g.b.rows : g.b.cols, g.n);
  ASSERT_EQ(g.c.rows, g.m);
  ASSERT_EQ(g.c.cols, g.n);
  for (const ColumnMajorMatrix* m : {&g.a, &g.b, &g.c}) ASSERT_GE(m->ld, m->rows);
  for (int64_t p = 0; p < g.batch; ++p)
    for (int64_t i = 0; i < g.m; ++i)
      for (int64_t j = 0; j < g.n; ++j) {
        double s = 0.0;
        for (int64_t l = 0; l < g.k; ++l) {
          const float x = g.a.transpose ? at(a, g.a, p, l, i) : at(a, g.a, p, i, l);
          const float y = g.b.transpose ? at(b, g.b, p, j, l) : at(b, g.b, p, l, j);
          s += double(x) * double(y);
        }
        float& d = c[size_t(p * g.c.batch_stride + j * g.c.ld + i)];
        d = float(alpha * s + beta * double(d));
      }
}

// Batch entry p of a row-major [rows, cols] matrix stored with leading dimension ld, packed.
Vec packed(const Vec& x, int64_t p, int64_t stride, int64_t rows, int64_t cols, int64_t ld) {
  Vec out(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[size_t(r * cols + c)] = x[size_t(p * stride + r * ld + c)];
  return out;
}

Tensor host(Vec& v, int64_t rows, int64_t cols) {
  return {v.data(), DType::f32, rows, cols, Device{DeviceKind::reference, 0}};
}

// Storage for a batch of row-major matrices: the last entry ends at its last row.
size_t storage(int64_t batch, int64_t stride, int64_t rows, int64_t ld) {
  return size_t((batch - 1) * stride + rows * ld);
}

void check_case(RowMajorGemm g, float alpha, float beta) {
  const std::string what = "M " + std::to_string(g.M) + " N " + std::to_string(g.N) + " K " +
                           std::to_string(g.K) + " ta " + std::to_string(g.trans_a) + " tb " +
                           std::to_string(g.trans_b) + " batch " + std::to_string(g.batch);
  const int64_t a_rows = g.trans_a ? g.K : g.M, a_cols = g.trans_a ? g.M : g.K;
  const int64_t b_rows = g.trans_b ? g.N : g.K, b_cols = g.trans_b ? g.K : g.N;
  const Vec a = test::random_normal(storage(g.batch, g.stride_a, a_rows, g.lda), 1);
  const Vec b = test::random_normal(storage(g.batch, g.stride_b, b_rows, g.ldb), 2);
  const Vec c0 = test::random_normal(storage(g.batch, g.stride_c, g.M, g.ldc), 3);
  Vec c = c0;
  // cuBLASLt's A is the row-major B and its B the row-major A: the operands go in swapped.
  emulate(cuda::to_column_major(g), b, a, c, alpha, beta);
  if (::testing::Test::HasFatalFailure()) return;
  for (int64_t p = 0; p < g.batch; ++p) {
    Vec pa = packed(a, p, g.stride_a, a_rows, a_cols, g.lda);
    Vec pb = packed(b, p, g.stride_b, b_rows, b_cols, g.ldb);
    Vec pc = packed(c0, p, g.stride_c, g.M, g.N, g.ldc);
    for (float& x : pc) x *= beta;  // the reference accumulates onto c: scale it first
    ref::matmul(host(pc, g.M, g.N), host(pa, a_rows, a_cols), g.trans_a, host(pb, b_rows, b_cols),
                g.trans_b, alpha, true);
    const Vec got = packed(c, p, g.stride_c, g.M, g.N, g.ldc);
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], pc[i], 1e-4 * (1.0 + std::fabs(pc[i]))) << what << " batch " << p << " [" << i << "]";
  }
}

TEST(GemmLayout, ColumnMajorMappingMatchesReferenceMatmul) {
  const int64_t sizes[][3] = {{5, 7, 3}, {1, 1, 1}, {13, 1, 9}, {2, 11, 17}, {16, 8, 4}};
  for (const auto& s : sizes)
    for (int trans = 0; trans < 4; ++trans)
      for (int64_t pad : {0, 3}) {
        RowMajorGemm g;
        g.M = s[0], g.N = s[1], g.K = s[2];
        g.trans_a = trans & 1, g.trans_b = trans & 2;
        g.lda = (g.trans_a ? g.M : g.K) + pad;
        g.ldb = (g.trans_b ? g.K : g.N) + pad;
        g.ldc = g.N + pad;
        check_case(g, 0.5f, 0.0f);
        check_case(g, 1.25f, 1.0f);  // accumulate onto C
      }
}

TEST(GemmLayout, BatchedStridesMatchReferenceMatmul) {
  // Attention's shapes: heads side by side in one activation row (ld = heads * D, stride D) and a
  // key/value head shared by a group of query heads (stride 0).
  const int64_t T = 6, D = 5, heads = 3;
  for (int trans = 0; trans < 4; ++trans) {
    RowMajorGemm g;
    g.trans_a = trans & 1, g.trans_b = trans & 2;
    g.M = T, g.N = T + 1, g.K = D;
    g.lda = heads * (g.trans_a ? g.M : g.K), g.stride_a = g.trans_a ? g.M : g.K;
    g.ldb = g.trans_b ? g.K : g.N, g.stride_b = 0;
    g.ldc = g.N + 2, g.stride_c = g.M * g.ldc + 1;
    g.batch = heads;
    check_case(g, 0.7f, 0.0f);
    check_case(g, 0.7f, 1.0f);
  }
}

TEST(GemmLayout, RejectsLeadingDimensionNarrowerThanTheMatrix) {
  RowMajorGemm g;
  g.M = 4, g.N = 3, g.K = 5;
  g.lda = 4, g.ldb = 3, g.ldc = 3;  // A is [4, 5]: lda 4 would overlap its rows
  EXPECT_THROW(cuda::to_column_major(g), Error);
}

}  // namespace
}  // namespace mt
