// How a row-major matrix product is handed to cuBLASLt, which reads every matrix column-major.
// A row-major matrix X [r, c] with leading dimension ld is, read column-major, X^T [c, r] with the
// same ld, so C = op(A) op(B) is computed as C^T = op(B)^T op(A)^T: the operands swap places and
// keep their transposes. This header is plain C++ (no CUDA types) so that the CPU tests check the
// mapping against the reference matmul's indexing (tests/test_gemm_layout.cpp).
#pragma once
#include <cstdint>

#include "core/error.h"

namespace mt::cuda {

// C[M, N] = alpha op(A) op(B) (+ C), row-major. Each leading dimension is the elements from one
// stored row to the next (at least the stored width: a head's columns inside a wider activation
// have a larger one). For a batch of products each stride is the elements from one product's
// matrix to the next; a stride 0 shares the matrix between all of them.
struct RowMajorGemm {
  int64_t M = 0, N = 0, K = 0;
  bool trans_a = false, trans_b = false;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
};

// One matrix as a cuBLASLt layout describes it: `rows` x `cols` column-major, `ld` elements from
// one column to the next; the op transposes it when `transpose`.
struct ColumnMajorMatrix {
  int64_t rows = 0, cols = 0, ld = 0;
  int64_t batch_stride = 0;
  bool transpose = false;
};

// D[m, n] = op(a)[m, k] op(b)[k, n], column-major. `a` reads the row-major product's B and `b`
// its A (the swap above); c is the row-major C.
struct ColumnMajorGemm {
  int64_t m = 0, n = 0, k = 0;
  ColumnMajorMatrix a, b, c;
  int64_t batch = 1;
};

inline ColumnMajorGemm to_column_major(const RowMajorGemm& g) {
  MT_CHECK(g.M >= 0 && g.N >= 0 && g.K >= 0 && g.batch >= 1, "GEMM sizes");
  // Stored (row-major) shapes: A is [M, K] or, transposed, [K, M]; B is [K, N] or [N, K].
  const int64_t a_cols = g.trans_a ? g.M : g.K, b_cols = g.trans_b ? g.K : g.N;
  MT_CHECK(g.lda >= a_cols && g.ldb >= b_cols && g.ldc >= g.N, "GEMM leading dimensions");
  ColumnMajorGemm r;
  r.m = g.N, r.n = g.M, r.k = g.K, r.batch = g.batch;
  // A row-major [rows, cols] is column-major [cols, rows].
  r.a = {b_cols, g.trans_b ? g.N : g.K, g.ldb, g.stride_b, g.trans_b};
  r.b = {a_cols, g.trans_a ? g.K : g.M, g.lda, g.stride_a, g.trans_a};
  r.c = {g.N, g.M, g.ldc, g.stride_c, false};
  return r;
}

}  // namespace mt::cuda
