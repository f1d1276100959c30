// The AVX512-BF16 instantiation of the bf16 attention tile product (attention_bf16.h). This whole
// file is compiled for avx512f + avx512bf16 whatever -march says (a target pragma, and out of the
// unity batches so the pragma and the tile header's templates stay with this file alone); only
// bf16_mm_avx512 is called from outside, and only after cpu_has_avx512bf16().
//
// Not run on a CPU with the instruction yet (the build and CI machines have AVX2 only): the same
// template is tested with the exact model of VDPBF16PS in bf16_dot.h.
#include <cstdint>
#include <cstring>

#include "core/bf16.h"

#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bf16")
#include <immintrin.h>

#include "kernels/cpu/bf16_tile_product.h"

namespace mt::attn {

namespace {

struct Bf16DotAvx512 {
  static constexpr int kLanes = 16;
  using Acc = __m512;
  using Pairs = __m512i;
  static Acc zero() { return _mm512_setzero_ps(); }
  static Acc load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, Acc a) { _mm512_storeu_ps(p, a); }
  static Pairs load_pairs(const uint32_t* p) { return _mm512_loadu_si512(p); }
  static Pairs splat(uint32_t w) { return _mm512_set1_epi32(int(w)); }
  static Acc dot(Acc acc, Pairs a, Pairs b) {
    return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh&>(a), reinterpret_cast<__m512bh&>(b));
  }
};

}  // namespace

void bf16_mm_avx512(float* c, int64_t ldc, const uint32_t* a, int64_t lda, const uint32_t* b,
                    int64_t ldb, int64_t M, int64_t N, int64_t K2, bool accumulate) {
  bmm<Bf16DotAvx512>(c, ldc, a, lda, b, ldb, M, N, K2, accumulate);
}

}  // namespace mt::attn
#pragma GCC pop_options

#else
#include "core/error.h"
#include "kernels/cpu/attention_bf16.h"

namespace mt::attn {
void bf16_mm_avx512(float*, int64_t, const uint32_t*, int64_t, const uint32_t*, int64_t, int64_t,
                    int64_t, int64_t, bool) {
  fail("AVX512-BF16 attention products exist only on x86-64");
}
}  // namespace mt::attn
#endif
