// The bf16 x bf16 -> f32 tile product of the bf16 attention path, written against a dot-product
// "ISA" (bf16_dot.h: the exact model, or AVX512-BF16 in attention_bf16_native.cpp). Operand
// layouts: attention_bf16_tiles.h. Templates only, nothing else: attention_bf16_native.cpp
// includes this under an AVX-512 target pragma, and an ordinary inline function defined here
// could then be emitted with AVX-512 code and picked by the linker for every caller.
#pragma once
#include <cstdint>

namespace mt::attn {

// C[M x N] (+)= A[M x 2 K2] * B[2 K2 x N], f32 accumulation, N a multiple of 16. The sum over k
// runs pair by pair in ascending order (the pair's odd element first: the instruction's order),
// so results depend on neither threads nor the blocking of M and N.
template <class Isa, int R, int NV, bool kAcc>
inline void bmm_block(float* c, int64_t ldc, const uint32_t* a, int64_t lda, const uint32_t* b,
                      int64_t ldb, int64_t K2) {
  constexpr int L = Isa::kLanes;
  typename Isa::Acc acc[R][NV];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = kAcc ? Isa::load(c + r * ldc + v * L) : Isa::zero();
  for (int64_t p = 0; p < K2; ++p) {
    typename Isa::Pairs bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = Isa::load_pairs(b + p * ldb + v * L);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const typename Isa::Pairs av = Isa::splat(a[r * lda + p]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = Isa::dot(acc[r][v], av, bv[v]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) Isa::store(c + r * ldc + v * L, acc[r][v]);
}

template <class Isa, int R, bool kAcc>
inline void bmm_rows(float* c, int64_t ldc, const uint32_t* a, int64_t lda, const uint32_t* b,
                     int64_t ldb, int64_t N, int64_t K2) {
  constexpr int L = Isa::kLanes;
  int64_t n = 0;
  // 4 rows x 4 vectors: 16 accumulators + 4 B vectors + 1 broadcast of the 32 zmm registers.
  for (; n + 4 * L <= N; n += 4 * L) bmm_block<Isa, R, 4, kAcc>(c + n, ldc, a, lda, b + n, ldb, K2);
  for (; n < N; n += L) bmm_block<Isa, R, 1, kAcc>(c + n, ldc, a, lda, b + n, ldb, K2);
}

template <class Isa>
inline void bmm(float* c, int64_t ldc, const uint32_t* a, int64_t lda, const uint32_t* b,
                int64_t ldb, int64_t M, int64_t N, int64_t K2, bool accumulate) {
  int64_t i = 0;
  if (accumulate) {
    for (; i + 4 <= M; i += 4) bmm_rows<Isa, 4, true>(c + i * ldc, ldc, a + i * lda, lda, b, ldb, N, K2);
    for (; i < M; ++i) bmm_rows<Isa, 1, true>(c + i * ldc, ldc, a + i * lda, lda, b, ldb, N, K2);
  } else {
    for (; i + 4 <= M; i += 4) bmm_rows<Isa, 4, false>(c + i * ldc, ldc, a + i * lda, lda, b, ldb, N, K2);
    for (; i < M; ++i) bmm_rows<Isa, 1, false>(c + i * ldc, ldc, a + i * lda, lda, b, ldb, N, K2);
  }
}

}  // namespace mt::attn
