#include "kernels/cpu/adamw.h"

#include <cstring>

namespace mt {

namespace {

// Elements per block: a multiple of every vector width (4, 8 or 16 floats), so a block's loop is
// whole vectors with no scalar remainder, and small, so the padded last block (below) is a few KiB
// on the stack.
constexpr int64_t kBlock = 256;

// One block of exactly kBlock elements, each updated and its bf16 copy written in the same
// iteration, from registers: one sweep over memory, 30 bytes an element (the copy used to be a
// second sweep that read the new weights again). The loop is vectorised by the compiler: this
// file is built with -fno-math-errno (CMakeLists.txt), so sqrtf is the correctly rounded
// vsqrtps/sqrtps rather than a call that may set errno. The update is dm::adamw_element, the CUDA
// kernel's, unchanged: the same IEEE divisions and square root, so no error beyond f32 rounding is
// added, and the results are the previous kernel's, bit for bit. noinline: inlined into
// the OpenMP region, GCC 12 loses the __restrict and keeps the bf16 loop scalar.
template <bool kCopy>
[[gnu::noinline]] void update_block(float* __restrict w, bf16* __restrict w16,
                                    const float* __restrict g, float* __restrict m,
                                    float* __restrict v, const AdamWScalars& s) {
  for (int64_t i = 0; i < kBlock; ++i) {
    dm::adamw_element(w[i], m[i], v[i], g[i], s);
    if constexpr (kCopy) w16[i] = float_to_bf16(w[i]);
  }
}

template <bool kCopy>
void update(float* __restrict w, bf16* __restrict w16, const float* __restrict g,
            float* __restrict m, float* __restrict v, int64_t n, const AdamWScalars& s_in) {
  const AdamWScalars s = s_in;  // a local copy: stores through w, m, v cannot change it
  const int64_t full = n / kBlock;
#pragma omp parallel for schedule(static) if (n > (1 << 15))
  for (int64_t b = 0; b < full; ++b) {
    const int64_t o = b * kBlock;
    update_block<kCopy>(w + o, kCopy ? w16 + o : nullptr, g + o, m + o, v + o, s);
  }
  // The last n % kBlock elements go through the same vector code, padded to a block on the stack:
  // every element is then computed by the same instructions wherever it lies, so the result does
  // not depend on the thread count, the tensor's split or its offset (a compiler-generated scalar
  // remainder could contract a*b+c into an FMA differently from the vector body).
  const int64_t o = full * kBlock, rest = n - o;
  if (rest == 0) return;
  alignas(64) float tw[kBlock] = {}, tg[kBlock] = {}, tm[kBlock] = {}, tv[kBlock] = {};
  alignas(64) bf16 t16[kBlock];
  const size_t bytes = size_t(rest) * sizeof(float);
  std::memcpy(tw, w + o, bytes), std::memcpy(tg, g + o, bytes);
  std::memcpy(tm, m + o, bytes), std::memcpy(tv, v + o, bytes);
  update_block<kCopy>(tw, t16, tg, tm, tv, s);
  std::memcpy(w + o, tw, bytes), std::memcpy(m + o, tm, bytes), std::memcpy(v + o, tv, bytes);
  if (kCopy) std::memcpy(w16 + o, t16, size_t(rest) * sizeof(bf16));
}

}  // namespace

void adamw_update(float* w, bf16* w16, const float* g, float* m, float* v, int64_t n,
                  const AdamWScalars& s) {
  if (n <= 0) return;
  if (w16)
    update<true>(w, w16, g, m, v, n, s);
  else
    update<false>(w, nullptr, g, m, v, n, s);
}

}  // namespace mt
