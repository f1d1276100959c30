#include "kernels/cpu/gemm_skinny.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "core/bf16.h"

namespace mt {

// Its own namespace: the library is built in unity batches, where another file's anonymous
// namespace would share these names.
namespace skinny {
namespace {

// Element (r, c) of op(X) for a stored operand X with leading dimension ld.
template <class T>
struct Operand {
  const T* p;
  int64_t ld;
  bool trans;
  float operator()(int64_t r, int64_t c) const { return to_float(trans ? p[c * ld + r] : p[r * ld + c]); }
};

// C's element from the product's sum: alpha * sum (+ C), rounded once to C's type, as oneDNN's
// sgemm on a widened C and the round back did.
template <class U>
inline void put(U* c, float sum, float alpha, bool accumulate) {
  const float v = alpha * sum;
  *c = from_float<U>(accumulate ? v + to_float(*c) : v);
}

typedef float f32x8 __attribute__((vector_size(32)));
typedef uint16_t u16x8 __attribute__((vector_size(16)));
typedef uint32_t u32x8 __attribute__((vector_size(32)));
typedef int32_t i32x8 __attribute__((vector_size(32)));

inline f32x8 load8(const float* p) {
  f32x8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline f32x8 load8(const bf16* p) {  // widened: the bf16's bits are the top half of the float's
  u16x8 h;
  std::memcpy(&h, p, sizeof h);
  const u32x8 w = __builtin_convertvector(h, u32x8) << 16;
  f32x8 v;
  std::memcpy(&v, &w, sizeof v);
  return v;
}
inline void store8(float* p, f32x8 v) { std::memcpy(p, &v, sizeof v); }
inline void store8(bf16* p, f32x8 v) {  // float_to_bf16 (core/bf16.h) lane by lane
  u32x8 u;
  std::memcpy(&u, &v, sizeof u);
  i32x8 magnitude;
  const u32x8 m = u & 0x7fffffffu;
  std::memcpy(&magnitude, &m, sizeof m);
  const i32x8 nan = magnitude > 0x7f800000;  // above infinity's bits: a NaN
  const u32x8 rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const u32x8 r = nan ? (u >> 16) | 0x40u : rounded;
  const u16x8 h = __builtin_convertvector(r, u16x8);
  std::memcpy(static_cast<void*>(p), &h, sizeof h);
}

// Eight contiguous elements of C from their sums (put's arithmetic, lane by lane).
template <class U>
inline void put8(U* c, f32x8 sum, float alpha, bool accumulate) {
  const f32x8 v = alpha * sum;
  store8(c, accumulate ? v + load8(c) : v);
}

// A product shares the threads only when it is big enough to pay for a parallel region (an MoE
// expert's adapter, a hundred rows, stays on its thread); inside a parallel region (gemm_group)
// the region is one thread anyway.
bool worth_threads(const GemmArgs& a) { return double(a.M) * double(a.N) * double(a.K) >= double(1 << 20); }

// The staged small operands, f32; per thread, since gemm_group calls from every thread.
struct Staged {
  std::vector<float> s, b;
};
thread_local Staged staged;

// The first n (< 8) elements at p, the rest zero: a row's last columns without reading past it.
template <class T>
inline f32x8 load_part(const T* p, int64_t n) {
  T tmp[8] = {};
  for (int64_t i = 0; i < n; ++i) tmp[i] = p[i];
  return load8(tmp);
}
template <class T>
inline f32x8 load_cols(const T* p, int64_t n) {
  return n >= 8 ? load8(p) : load_part(p, n);
}
inline float lanes_sum(f32x8 s) { return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])); }

// The register tile of the three broadcast shapes: acc[r][v] = sum over k < K, in order, of
// s[k ls + r] times the stored row k of the big operand (columns v*8.., `cols` of them valid).
// R x V accumulators plus V row vectors and a broadcast fit AVX2's 16 registers at 6 x 2.
template <int R, int V, class T>
inline void broadcast_tile(f32x8 (&acc)[R][V], const float* s, int64_t ls, const T* big, int64_t ld, int64_t K,
                           int64_t cols) {
  for (auto& row : acc)
    for (auto& v : row) v = f32x8{};
  for (int64_t k = 0; k < K; ++k) {
    f32x8 b[V];
    for (int v = 0; v < V; ++v) b[v] = load_cols(big + k * ld + v * 8, cols - v * 8);
    const float* sk = s + k * ls;
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < V; ++v) acc[r][v] += sk[r] * b[v];
  }
}

constexpr int kRows = 6, kVecs = 2;
constexpr int64_t kCols = 8 * kVecs;

// The staged small operand of broadcast_product, element (k, i): laid out [K, I] (I at most the
// limit, a row of it a few cache lines), or, where I is large (small_inner's rows of C), in panels
// of kRows columns, each [K, kRows]: the tile's broadcasts then sit in a few lines instead of K
// lines I floats apart (which all fall into one set of L1 when I is a multiple of 1024).
struct SmallOperand {
  const float* p;
  int64_t I, K;
  bool panels;
  // Where row-of-tile i0's elements start and their stride over k.
  std::pair<const float*, int64_t> at(int64_t i0) const {
    if (!panels) return {p + i0, I};
    const int64_t first = i0 / kRows * kRows;
    return {p + first * K + (i0 - first), std::min<int64_t>(kRows, I - first)};
  }
  size_t index(int64_t k, int64_t i) const {
    if (!panels) return size_t(k * I + i);
    const int64_t first = i / kRows * kRows;
    return size_t(first * K + k * std::min<int64_t>(kRows, I - first) + (i - first));
  }
};

// Every tile of an [I x J] result whose element (i, j) is sum_k s(k, i) big[k ld + j],
// handed to out(i, j, v, n): the n (<= 8) sums of row i from column j on, lanes of v. The threads
// share out the tiles by rows of them (`by_rows`: where the result is the big matrix, written row
// after row) or by columns (where I is small and the big operand's strip of columns is reused
// from cache by every row of tiles). An element's sum does not depend on its tile, so the results
// depend on neither the order nor the threads.
template <class T, class Out>
void broadcast_product(int64_t I, int64_t J, int64_t K, const SmallOperand& s, const T* big, int64_t ld, bool by_rows,
                       bool threads, const Out& out) {
  auto tile = [&]<int R>(int64_t i0, int64_t j0) {
    const int64_t cols = std::min(kCols, J - j0);
    f32x8 acc[R][kVecs];
    const auto [si, ls] = s.at(i0);
    broadcast_tile<R, kVecs>(acc, si, ls, big + j0, ld, K, cols);
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < kVecs && v * 8 < cols; ++v) out(i0 + r, j0 + v * 8, acc[r][v], std::min<int64_t>(8, cols - v * 8));
  };
  auto rows_of_tiles = [&](int64_t i0, int64_t j0) {  // tiles i0.. of the column block j0
    if (i0 + kRows <= I) return tile.template operator()<kRows>(i0, j0);
    for (int64_t i = i0; i < I; ++i) tile.template operator()<1>(i, j0);
  };
  const int64_t row_blocks = (I + kRows - 1) / kRows, col_blocks = (J + kCols - 1) / kCols;
  if (by_rows) {
#pragma omp parallel for schedule(static) if (threads)
    for (int64_t ib = 0; ib < row_blocks; ++ib)
      for (int64_t jb = 0; jb < col_blocks; ++jb) rows_of_tiles(ib * kRows, jb * kCols);
  } else {
#pragma omp parallel for schedule(static) if (threads)
    for (int64_t jb = 0; jb < col_blocks; ++jb)
      for (int64_t ib = 0; ib < row_blocks; ++ib) rows_of_tiles(ib * kRows, jb * kCols);
  }
}

// The sums of broadcast_product as rows of C: eight contiguous elements at once.
template <class U>
auto rows_out(const GemmArgs& a, U* C) {
  return [&a, C](int64_t m, int64_t j, f32x8 v, int64_t count) {
    U* c = C + m * a.ldc + j;
    if (count == 8) return put8(c, v, a.alpha, a.accumulate);
    for (int64_t l = 0; l < count; ++l) put(c + l, v[l], a.alpha, a.accumulate);
  };
}

// K <= limit: C[m][j] = sum_k op(A)(m, k) op(B)(k, j). Both small operands staged f32: op(A)
// transposed ([K, M], the broadcasts) and op(B) ([K, N], the rows); the work is writing C.
template <class T, class U>
void small_inner(const GemmArgs& a) {
  const Operand<T> A{static_cast<const T*>(a.A), a.lda, a.trans_a}, B{static_cast<const T*>(a.B), a.ldb, a.trans_b};
  const int64_t M = a.M, N = a.N, K = a.K;
  staged.s.resize(size_t(K * M));
  staged.b.resize(size_t(K * N));
  float* s = staged.s.data();
  float* b = staged.b.data();
  const SmallOperand so{s, M, K, /*panels=*/true};
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) s[so.index(k, m)] = A(m, k);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) b[k * N + n] = B(k, n);
  U* C = static_cast<U*>(a.C);
  broadcast_product(M, N, K, so, static_cast<const float*>(b), N, /*by_rows=*/true, worth_threads(a), rows_out(a, C));
}

// op(A) = A^T (A stored [K, M]), M <= limit, B stored [K, N]: C[m][j] = sum_k A[k][m] B[k][j];
// A staged f32 (the broadcasts), B's rows read in their own type.
template <class T, class U>
void trans_small_rows(const GemmArgs& a) {
  const T* A = static_cast<const T*>(a.A);
  const int64_t M = a.M, N = a.N, K = a.K;
  staged.s.resize(size_t(K * M));
  float* s = staged.s.data();
  for (int64_t k = 0; k < K; ++k)
    for (int64_t m = 0; m < M; ++m) s[k * M + m] = to_float(A[k * a.lda + m]);
  U* C = static_cast<U*>(a.C);
  broadcast_product(M, N, K, SmallOperand{s, M, K, false}, static_cast<const T*>(a.B), a.ldb, /*by_rows=*/false,
                    worth_threads(a), rows_out(a, C));
}

// op(A) = A^T (A stored [K, M]), N <= limit: C^T[n][m] = sum_k op(B)(k, n) A[k][m]; op(B) staged
// f32 (the broadcasts), A's rows read in their own type.
template <class T, class U>
void trans_small_cols(const GemmArgs& a) {
  const Operand<T> B{static_cast<const T*>(a.B), a.ldb, a.trans_b};
  const int64_t M = a.M, N = a.N, K = a.K;
  staged.s.resize(size_t(K * N));
  float* s = staged.s.data();
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) s[k * N + n] = B(k, n);
  U* C = static_cast<U*>(a.C);
  broadcast_product(N, M, K, SmallOperand{s, N, K, false}, static_cast<const T*>(a.A), a.lda, /*by_rows=*/false,
                    worth_threads(a),
                    [&](int64_t n, int64_t m0, f32x8 v, int64_t count) {
                      for (int64_t l = 0; l < count; ++l) put(C + (m0 + l) * a.ldc + n, v[l], a.alpha, a.accumulate);
                    });
}

// N <= limit, A stored [M, K]: C[m][n] = sum_k A[m][k] op(B)(k, n), dot products along A's rows
// (read in their own type) with op(B)'s columns (staged f32, [N, K], padded to 4 columns of zeros).
// A tile of 2 rows x 4 columns: 8 chains of FMAs in flight, each summed in 8 lanes over k, then
// across the lanes in a fixed order.
template <int R, class T>
inline void dot_tile(float (&out)[R][4], const T* const x[R], const float* const y[4], int64_t K) {
  f32x8 acc[R][4] = {};
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    f32x8 xv[R];
    for (int r = 0; r < R; ++r) xv[r] = load8(x[r] + k);
    for (int c = 0; c < 4; ++c) {
      const f32x8 yv = load8(y[c] + k);
      for (int r = 0; r < R; ++r) acc[r][c] += xv[r] * yv;
    }
  }
  if (k < K) {  // the rows' last K % 8 columns, zero-padded (y's padding is stored)
    f32x8 xv[R];
    for (int r = 0; r < R; ++r) xv[r] = load_part(x[r] + k, K - k);
    for (int c = 0; c < 4; ++c) {
      const f32x8 yv = load8(y[c] + k);
      for (int r = 0; r < R; ++r) acc[r][c] += xv[r] * yv;
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < 4; ++c) out[r][c] = lanes_sum(acc[r][c]);
}

template <class T, class U>
void small_cols(const GemmArgs& a) {
  const Operand<T> B{static_cast<const T*>(a.B), a.ldb, a.trans_b};
  const T* A = static_cast<const T*>(a.A);
  const int64_t M = a.M, N = a.N, K = a.K;
  const int64_t N4 = (N + 3) / 4 * 4, K8 = (K + 7) / 8 * 8;  // padded with zeros
  staged.b.assign(size_t(N4 * K8), 0.0f);
  float* bt = staged.b.data();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) bt[n * K8 + k] = B(k, n);
  U* C = static_cast<U*>(a.C);
  auto rows = [&]<int R>(int64_t m0) {
    const T* x[R];
    for (int r = 0; r < R; ++r) x[r] = A + (m0 + r) * a.lda;
    for (int64_t n0 = 0; n0 < N; n0 += 4) {
      const float* y[4] = {bt + n0 * K8, bt + (n0 + 1) * K8, bt + (n0 + 2) * K8, bt + (n0 + 3) * K8};
      float d[R][4];
      dot_tile<R>(d, x, y, K);
      for (int r = 0; r < R; ++r)
        for (int64_t c = 0; c < 4 && n0 + c < N; ++c) put(C + (m0 + r) * a.ldc + n0 + c, d[r][c], a.alpha, a.accumulate);
    }
  };
  const int64_t pairs = M / 2;
#pragma omp parallel for schedule(static) if (worth_threads(a))
  for (int64_t p = 0; p < pairs; ++p) rows.template operator()<2>(2 * p);
  if (M % 2) rows.template operator()<1>(M - 1);
}

enum class Shape { kNone, kSmallInner, kSmallCols, kTransSmallCols, kTransSmallRows };

Shape shape_of(const GemmArgs& a) {
  if (a.K <= kSkinnyLimit) return Shape::kSmallInner;
  if (!a.trans_a && a.N <= kSkinnyLimit) return Shape::kSmallCols;
  if (a.trans_a && a.N <= kSkinnyLimit) return Shape::kTransSmallCols;
  if (a.trans_a && !a.trans_b && a.M <= kSkinnyLimit) return Shape::kTransSmallRows;
  return Shape::kNone;
}

template <class T, class U>
void run(Shape s, const GemmArgs& a) {
  switch (s) {
    case Shape::kSmallInner: return small_inner<T, U>(a);
    case Shape::kSmallCols: return small_cols<T, U>(a);
    case Shape::kTransSmallCols: return trans_small_cols<T, U>(a);
    case Shape::kTransSmallRows: return trans_small_rows<T, U>(a);
    case Shape::kNone: return;
  }
}

}  // namespace
}  // namespace skinny

bool skinny_gemm(const GemmArgs& a) {
  using namespace skinny;
  const Shape s = shape_of(a);
  if (s == Shape::kNone) return false;
  if (a.ab_type == DType::f32) run<float, float>(s, a);
  else if (a.c_type == DType::f32) run<bf16, float>(s, a);
  else run<bf16, bf16>(s, a);
  return true;
}

void release_skinny_gemm_scratch() { skinny::staged = {}; }

}  // namespace mt
