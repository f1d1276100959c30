// The AMX-BF16 instantiation of the bf16 attention tile product (attention_bf16.h,
// amx_tile_product.h). This file is compiled for amx-tile + amx-bf16 whatever -march says (a
// target pragma, and out of the unity batches so the pragma and the product's templates stay with
// this file alone); only bf16_mm_amx is called from outside, and only after cpu_has_amx_bf16()
// (which also obtained Linux's permission for the tile data state).
//
// Not run on a CPU with AMX (the build and CI machines have AVX2 only): the same template is
// tested with the exact model of TDPBF16PS in amx_tile_model.h.
#include <cstdint>

#include "kernels/cpu/attention_bf16.h"

#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("amx-tile,amx-bf16")
#include <immintrin.h>

#include "kernels/cpu/amx_tile_product.h"

namespace mt::attn {

namespace {

// GCC's tile intrinsics are asm statements that name the tile register by its literal number
// (so each number gets its own line here) and do not tell the compiler which memory a load or
// LDTILECFG reads: without the barrier, stores to a staging buffer or the configuration just
// before could be sunk past the instruction or dropped as dead.
inline void reads_memory(const void* p) { asm volatile("" : : "r"(p) : "memory"); }

struct AmxTilesNative {
  static void config(const AmxTileConfig* c) {
    reads_memory(c);
    _tile_loadconfig(c);
  }
  static void release() { _tile_release(); }
  template <int T>
  static void zero() {
    static_assert(T >= 0 && T < 4);
    if constexpr (T == 0) _tile_zero(0);
    else if constexpr (T == 1) _tile_zero(1);
    else if constexpr (T == 2) _tile_zero(2);
    else _tile_zero(3);
  }
  template <int T>
  static void load(const void* p, int64_t stride) {
    static_assert(T >= 0 && T < 8);
    reads_memory(p);
    if constexpr (T == 0) _tile_loadd(0, p, stride);
    else if constexpr (T == 1) _tile_loadd(1, p, stride);
    else if constexpr (T == 2) _tile_loadd(2, p, stride);
    else if constexpr (T == 3) _tile_loadd(3, p, stride);
    else if constexpr (T == 4) _tile_loadd(4, p, stride);
    else if constexpr (T == 5) _tile_loadd(5, p, stride);
    else if constexpr (T == 6) _tile_loadd(6, p, stride);
    else _tile_loadd(7, p, stride);
  }
  template <int T>
  static void store(void* p, int64_t stride) {  // _tile_stored clobbers memory itself
    static_assert(T >= 0 && T < 4);
    if constexpr (T == 0) _tile_stored(0, p, stride);
    else if constexpr (T == 1) _tile_stored(1, p, stride);
    else if constexpr (T == 2) _tile_stored(2, p, stride);
    else _tile_stored(3, p, stride);
  }
  // The tiling uses C tile 2r + q with A tile 4 + r and B tile 6 + q.
  template <int C, int A, int B>
  static void dp() {
    if constexpr (C == 0 && A == 4 && B == 6) _tile_dpbf16ps(0, 4, 6);
    else if constexpr (C == 1 && A == 4 && B == 7) _tile_dpbf16ps(1, 4, 7);
    else if constexpr (C == 2 && A == 5 && B == 6) _tile_dpbf16ps(2, 5, 6);
    else if constexpr (C == 3 && A == 5 && B == 7) _tile_dpbf16ps(3, 5, 7);
    else static_assert(C < 0, "no TDPBF16PS line for these tiles");
  }
};

}  // namespace

void bf16_mm_amx(float* c, int64_t ldc, const uint32_t* a, int64_t lda, const uint32_t* b,
                 int64_t ldb, int64_t M, int64_t N, int64_t K2, bool accumulate) {
  amx_mm<AmxTilesNative>(c, ldc, a, lda, b, ldb, M, N, K2, accumulate);
}

}  // namespace mt::attn
#pragma GCC pop_options

#else
#include "core/error.h"

namespace mt::attn {
void bf16_mm_amx(float*, int64_t, const uint32_t*, int64_t, const uint32_t*, int64_t, int64_t,
                 int64_t, int64_t, bool) {
  fail("AMX attention products exist only on x86-64");
}
}  // namespace mt::attn
#endif
