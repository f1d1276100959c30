// Tile-level building blocks of the attention kernel (internal to attention.cpp): a small f32
// matrix-multiply micro-kernel, a vectorised exp2, and loaders that turn a tile of q/k/v rows
// (bf16 or f32, strided by heads) into a dense, zero-padded f32 scratch tile.
//
// Why hand-written rather than the oneDNN wrapper: a 64x64x64 tile product is ~0.5 MFLOP, so
// per-call overhead (cache lookup, memory objects, stream wait) would dominate; these loops run
// straight out of L1. GCC vector extensions give explicit register blocking while staying
// portable (without AVX-512 the compiler splits the vectors; slower but correct).
#pragma once
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "core/bf16.h"

namespace mt::attn {

// Vector width in floats for the build target.
// kRows x kColVecs is the micro-tile of mm: its accumulators, the kColVecs B vectors of one k
// and the A broadcast must all stay in registers, or the accumulators are spilled and every FMA
// chain runs through a store and a reload.
#if defined(__AVX512F__)
constexpr int kVL = 16;
constexpr int kRows = 4;  // 4 rows x 4 vectors = 16 accumulators of the 32 zmm registers
constexpr int kColVecs = 4;
#elif defined(__AVX2__)
constexpr int kVL = 8;
// 6 rows x 2 vectors: 12 accumulators + 2 B vectors + 1 broadcast of the 16 ymm registers, and
// 12 independent FMA chains cover the FMA latency of both pipes. (2 x 8 spilled: 16 accumulators
// alone fill the register file.)
constexpr int kRows = 6;
constexpr int kColVecs = 2;
#else
constexpr int kVL = 4;
constexpr int kRows = 2;
constexpr int kColVecs = 64 / kVL;
#endif
typedef float vf __attribute__((vector_size(kVL * 4)));
typedef int32_t vi __attribute__((vector_size(kVL * 4)));

// Tile edge (query rows per tile = key columns per tile). 64x64 f32 = 16 KiB: the operands of
// one tile product fit in L1 together.
constexpr int kTile = 64;
// Head dimension is padded to a multiple of this in scratch tiles, so every row is whole vectors.
constexpr int kPad = 16;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

inline int64_t pad_dim(int64_t d) { return (d + kPad - 1) / kPad * kPad; }

// Unaligned loads/stores (memcpy compiles to one vmovups; no aliasing questions).
inline vf vload(const float* p) {
  vf v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void vstore(float* p, vf v) { std::memcpy(p, &v, sizeof v); }
// x - (+0) is exactly x for every x (also -0), so the compiler folds it to a bare broadcast;
// vf{} + x would keep an add to turn -0 into +0.
inline vf vsplat(float x) { return x - vf{}; }
#if defined(__AVX2__) && !defined(__AVX512F__)  // kVL == 8
// a > b ? a : b and a < b ? a : b, NaNs included (either one NaN gives b), are what vmaxps and
// vminps compute; g++ turns the vector ?: in vexp2's clamps into a compare and a blend instead,
// two instructions each on a path with ~20.
inline vf vmax(vf a, vf b) { return (vf)_mm256_max_ps((__m256)a, (__m256)b); }
inline vf vmin(vf a, vf b) { return (vf)_mm256_min_ps((__m256)a, (__m256)b); }
#else
inline vf vmax(vf a, vf b) { return a > b ? a : b; }
inline vf vmin(vf a, vf b) { return a < b ? a : b; }
#endif

// 2^x for a vector. Range reduction x = n + r with n = round(x), |r| <= 1/2, then a degree-7
// Taylor polynomial of 2^r (relative error < 1e-8, below f32 rounding) and 2^n put into the
// exponent bits. x is clamped to [-127, 127]; at -127 the exponent field is 0, so -inf (a masked
// score) gives exactly 0, which the online softmax relies on.
inline vf vexp2(vf x) {
  x = vmax(x, vsplat(-127.0f));
  x = vmin(x, vsplat(127.0f));
  const float magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer (ties to even)
  vf t = x + magic;
  vf n = t - magic;
  vf r = x - n;  // exact
  vi ni = (vi)t - (vi)vsplat(magic);  // the integer n, read from the mantissa bits of t
  vf p = vsplat(1.5252733804059840e-05f);
  p = p * r + 1.5403530393381609e-04f;
  p = p * r + 1.3333558146428443e-03f;
  p = p * r + 9.6181291076284772e-03f;
  p = p * r + 5.5504108664821580e-02f;
  p = p * r + 2.4022650695910071e-01f;
  p = p * r + 6.9314718055994531e-01f;
  p = p * r + 1.0f;
  vf scale = (vf)((ni + 127) << 23);
  return p * scale;
}

// C[R x (NV*kVL)] (+)= A[R x k0:k1] * B[k0:k1 x (NV*kVL)], accumulators held in registers.
// A(i, k) is read at a[i*ars + k*aks], so a transposed A (P^T, dS^T) costs nothing extra.
// With cs (accumulating only), row r of C is multiplied by cs[r] as it is loaded: the online
// softmax's rescale of O, which then costs no pass of its own.
template <int R, int NV, bool kAcc>
inline void mm_block(float* c, int64_t ldc, const float* a, int64_t ars, int64_t aks,
                     const float* b, int64_t ldb, int64_t k0, int64_t k1, const float* cs) {
  vf acc[R][NV];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[r][v] = kAcc ? vload(c + r * ldc + v * kVL) : vf{};
  if (kAcc && cs)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[r][v] *= cs[r];
  for (int64_t k = k0; k < k1; ++k) {
    vf bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) bv[v] = vload(b + k * ldb + v * kVL);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      vf av = vsplat(a[r * ars + k * aks]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[r][v] += av * bv[v];
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) vstore(c + r * ldc + v * kVL, acc[r][v]);
}

template <int R, bool kAcc>
inline void mm_rows(float* c, int64_t ldc, const float* a, int64_t ars, int64_t aks,
                    const float* b, int64_t ldb, int64_t N, int64_t k0, int64_t k1,
                    const float* cs) {
  constexpr int kWide = kColVecs;  // a kColVecs-vector column block per pass
  int64_t n = 0;
  for (; n + kWide * kVL <= N; n += kWide * kVL)
    mm_block<R, kWide, kAcc>(c + n, ldc, a, ars, aks, b + n, ldb, k0, k1, cs);
  for (; n < N; n += kVL) mm_block<R, 1, kAcc>(c + n, ldc, a, ars, aks, b + n, ldb, k0, k1, cs);
}

// A block of `rows` (<= R) rows as one register block of that many rows: a 64-row tile is ten
// blocks of 6 and one of 4 on AVX2, not 4 single rows at the end.
template <int R, bool kAcc>
inline void mm_rows_n(float* c, int64_t ldc, const float* a, int64_t ars, int64_t aks,
                      const float* b, int64_t ldb, int64_t rows, int64_t N, int64_t k0,
                      int64_t k1, const float* cs) {
  if constexpr (R > 0) {
    if (rows == R) return mm_rows<R, kAcc>(c, ldc, a, ars, aks, b, ldb, N, k0, k1, cs);
    mm_rows_n<R - 1, kAcc>(c, ldc, a, ars, aks, b, ldb, rows, N, k0, k1, cs);
  }
}

// What one row block [i, i + rows) of a product needs: its columns [0, n_end) and the terms
// k0..k1 of its sums. A causal tile's products only need part of the tile: the keys up to a
// query block's last position, the queries from a key block's first position on.
struct Bounds {
  int64_t n_end, k0, k1;
};

// C[M x N] (+)= A[M x K] * B[K x N]; B and C row-major, N a multiple of kVL, with each row block's
// columns and terms cut to bounds(i, rows). Columns past n_end (rounded up to a vector) are not
// written; terms outside k0..k1 are skipped, so the caller must know them to be zero products.
// The summation order over k is fixed (k ascending), so results do not depend on threads or on
// the tiling of M and N. With row_scale (accumulating only), C's row i is first multiplied by
// row_scale[i] (every row, also one whose terms are all cut).
template <bool kAcc, class F>
inline void mm(float* c, int64_t ldc, const float* a, int64_t ars, int64_t aks, const float* b,
               int64_t ldb, int64_t M, int64_t N, F&& bounds, const float* row_scale = nullptr) {
  for (int64_t i = 0; i < M; i += kRows) {
    const int64_t rows = M - i < kRows ? M - i : kRows;
    const Bounds bd = bounds(i, rows);
    const int64_t n = (bd.n_end + kVL - 1) / kVL * kVL;
    if (n <= 0) continue;
    mm_rows_n<kRows, kAcc>(c + i * ldc, ldc, a + i * ars, ars, aks, b, ldb, rows, n < N ? n : N,
                           bd.k0, bd.k1, row_scale ? row_scale + i : nullptr);
  }
}

// The whole product: C[M x N] (+)= A[M x K] * B[K x N].
template <bool kAcc>
inline void mm(float* c, int64_t ldc, const float* a, int64_t ars, int64_t aks, const float* b,
               int64_t ldb, int64_t M, int64_t N, int64_t K) {
  mm<kAcc>(c, ldc, a, ars, aks, b, ldb, M, N, [N, K](int64_t, int64_t) { return Bounds{N, 0, K}; });
}

// dst[r, 0:dp] = f32(src[r*stride + 0:d]) for r < rows, zero in the padding columns and in rows
// rows..rows_total (a partial tile then behaves like a full one whose extra rows are zero).
template <class T>
inline void load_rows(float* dst, int64_t dp, const T* src, int64_t stride, int64_t rows,
                      int64_t rows_total, int64_t d) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* s = src + r * stride;
    float* o = dst + r * dp;
    for (int64_t i = 0; i < d; ++i) o[i] = to_float(s[i]);
    for (int64_t i = d; i < dp; ++i) o[i] = 0.0f;
  }
  if (rows_total > rows) std::memset(dst + rows * dp, 0, sizeof(float) * (rows_total - rows) * dp);
}

// One butterfly stage of an in-register kVL x kVL transpose: rows i and i+W (i & W == 0) swap
// their off-diagonal W-wide blocks. Stages W = kVL/2 ... 1 transpose the block. The shuffle masks
// come from a parameter pack so they are constants (one two-source permute each).
template <int W, int... J>
inline void butterfly(vf& lo, vf& hi, std::integer_sequence<int, J...>) {
  const vf a = lo, b = hi;
  lo = __builtin_shuffle(a, b, vi{((J & W) ? kVL + J - W : J)...});
  hi = __builtin_shuffle(a, b, vi{((J & W) ? kVL + J : J + W)...});
}
template <int W>
inline void transpose_stages(vf* v) {
  if constexpr (W > 0) {
#pragma GCC unroll 16
    for (int i = 0; i < kVL; ++i)
      if ((i & W) == 0) butterfly<W>(v[i], v[i + W], std::make_integer_sequence<int, kVL>{});
    transpose_stages<W / 2>(v);
  }
}

// dst[c, r] = src[r, c] for a kTile-row tile: K^T and V^T are the B operands whose rows must run
// over keys. Done once per key tile and shared by every query tile and head that uses it. Block
// by block in registers: a scalar strided copy cost ~5% of the whole kernel.
inline void transpose_tile(float* dst, const float* src, int64_t dp) {
  for (int64_t c = 0; c < dp; c += kVL)
    for (int r = 0; r < kTile; r += kVL) {
      vf v[kVL];
#pragma GCC unroll 16
      for (int i = 0; i < kVL; ++i) v[i] = vload(src + (r + i) * dp + c);
      transpose_stages<kVL / 2>(v);
#pragma GCC unroll 16
      for (int i = 0; i < kVL; ++i) vstore(dst + (c + i) * kTile + r, v[i]);
    }
}

// Store a row of f32 as T (first d values).
template <class T>
inline void store_row(T* dst, const float* src, int64_t d, float mul) {
  for (int64_t i = 0; i < d; ++i) dst[i] = from_float<T>(src[i] * mul);
}

}  // namespace mt::attn
