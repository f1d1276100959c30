// Causal GQA attention, FlashAttention-2 style on the CPU. See attention.h for the contract and
// attention_tiles.h for the tile kernels.
//
// Forward: one work item per (batch, KV head, query tile). The item runs all query heads of the
// KV group, so each K/V tile is converted and transposed once and used by every head of the
// group. Online softmax in the log2 domain (exp2 is cheaper than exp; lse is stored as natural
// log as the contract says).
//
// Backward: one work item per (batch, KV head, key chunk). An item owns the dK/dV rows of its key
// tiles, summed over the query heads of the group and the query tiles in a fixed order, so GQA
// needs no atomics. dQ of a query tile receives contributions from every key tile, so an item
// accumulates the dQ of its group's heads in f32 ([nrep, T, Dp], per thread). Normally one item
// covers all key tiles of a (b, KV head) and writes dQ itself; only when there are fewer
// (b, KV head) pairs than threads are the key tiles split into chunks, each item then keeps its
// partial dQ and the partials are summed in chunk order afterwards. Results are therefore
// bit-identical run to run for a fixed thread count (the chunk count depends on it). The fp32
// path takes an item's key tiles two at a time, so each Q and dO tile it widens to f32 serves
// both (the sums keep their order: see backward_item).
//
// bf16 tensors may take bf16 tile products instead (attention_bf16.h: AVX512-BF16 where the CPU
// has it, an exact emulation on request): the same items and loops, the operands packed as bf16
// pairs instead of widened to f32, P and dS rounded to bf16 for the products they feed.
#include "kernels/cpu/attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/buffer.h"
#include "core/error.h"
#include "kernels/cpu/attention_bf16.h"
#include "kernels/cpu/attention_bf16_tiles.h"
#include "kernels/cpu/attention_tiles.h"
#include "kernels/device_math/cp_positions.h"

namespace mt {

namespace {

using namespace attn;

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// Shape facts used everywhere.
struct Geo {
  int64_t B, T, Hq, Hkv, D;
  int64_t window; // > 0: sliding window
  int64_t cp, cp_rank;  // context parallelism: which chunks of the keys' sequence the queries are
  int64_t Tk;     // keys per row (cp T)
  int64_t Dp;     // D padded to kPad
  int64_t nrep;   // query heads per KV head
  int64_t nt;     // tiles along the T queries
  int64_t nkt;    // tiles along the Tk keys
  int64_t qs;     // row stride of q/out/dq (elements between consecutive tokens)
  int64_t ks;     // row stride of k/v/dk/dv
  float scale;    // the shape's, or 1/sqrt(D)
  explicit Geo(const AttentionShape& s)
      : B(s.B), T(s.T), Hq(s.Hq), Hkv(s.Hkv), D(s.D), window(s.window), cp(s.cp), cp_rank(s.cp_rank),
        Tk(s.T * s.cp), Dp(pad_dim(s.D)), nrep(s.Hq / s.Hkv), nt((s.T + kTile - 1) / kTile),
        nkt((Tk + kTile - 1) / kTile), qs(s.Hq * s.D), ks(s.Hkv * s.D),
        scale(s.scale > 0.0f ? s.scale : 1.0f / std::sqrt(float(s.D))) {}
  // The key position of query i (i itself without context parallelism); increasing in i.
  int64_t pos(int64_t i) const { return dm::cp_query_position(i, T, cp, cp_rank); }
};

void check_shape(const AttentionShape& s) {
  MT_CHECK(s.B > 0 && s.T > 0 && s.Hq > 0 && s.Hkv > 0 && s.D > 0, "attention sizes");
  MT_CHECK(s.Hq % s.Hkv == 0, "query heads must be a multiple of KV heads");
  MT_CHECK(s.window >= 0, "attention window must be >= 0");
  MT_CHECK(s.cp >= 1 && s.cp_rank >= 0 && s.cp_rank < s.cp && (s.cp == 1 || s.T % 2 == 0),
           "context-parallel attention sizes");
}

// A query tile's span of key positions: its first query's and its last query's (the positions
// increase with the query index).
struct QuerySpan {
  int64_t first, last;
};
QuerySpan query_span(const Geo& g, int64_t i0, int64_t mq) { return {g.pos(i0), g.pos(i0 + mq - 1)}; }

// With a sliding window: is every key of tile [j0, j0 + nk) too old for every query of the
// tile? The first query sees the oldest keys (j > first - w), so the tile's newest key decides.
// Such tiles are skipped (bit-exact: they would add P = 0).
bool tile_before_window(const Geo& g, const QuerySpan& q, int64_t j0, int64_t nk) {
  return g.window > 0 && j0 + nk - 1 <= q.first - g.window;
}

// Does the window hide some key of the tile from some query? The last query's bound is the
// tightest.
bool window_cuts_tile(const Geo& g, const QuerySpan& q, int64_t j0) {
  return g.window > 0 && j0 <= q.last - g.window;
}

// Must the (query tile, key tile) block be masked row by row: a key after some query (causal),
// a partial key tile, documents or a window cutting it?
bool tile_needs_mask(const Geo& g, const QuerySpan& q, int64_t j0, int64_t nk, const int32_t* segb) {
  return j0 + nk - 1 > q.first || nk < kTile || segb || window_cuts_tile(g, q, j0);
}

// Does the (query tile, key tile) block hold any pair the mask lets through? Only asked with
// segments (packed documents make many off-diagonal tiles empty). Skipping an empty tile is
// bit-exact with processing it: it would add P = 0 and rescale by exp2(0) = 1. A query's
// document is the one of the key at its position.
bool tile_has_pair(const Geo& g, const int32_t* seg, int64_t i0, int64_t mq, int64_t j0, int64_t nk) {
  for (int64_t i = 0; i < mq; ++i) {
    const int64_t pi = g.pos(i0 + i);
    for (int64_t j = 0; j < nk && j0 + j <= pi; ++j)
      if (seg[j0 + j] == seg[pi]) return true;
  }
  return false;
}

// The causal cut of a (query tile i0, key tile j0) block's products (tile products skip what
// the mask makes zero: in a diagonal tile about half). Query rows [i, i + rows) see keys before
// key_end: the position of their last row, + 1, relative to j0.
int64_t key_end(const Geo& g, int64_t i0, int64_t j0, int64_t nk, int64_t i, int64_t rows) {
  return std::clamp<int64_t>(g.pos(i0 + i + rows - 1) - j0 + 1, 0, nk);
}
// Key rows [j, j + rows) are seen by queries from query_begin on: the first whose position
// reaches key j0 + j (positions increase with the query).
int64_t query_begin(const Geo& g, int64_t i0, int64_t mq, int64_t j0, int64_t j) {
  int64_t q = 0;
  while (q < mq && g.pos(i0 + q) < j0 + j) ++q;
  return q;
}

// Set the masked entries of one score row to -inf: keys after the query's position qi (causal),
// keys past the row (partial tile padding), keys of another segment and keys at or before
// qi - window. Only the first `width` entries: the callers skip the rest (see live_vectors).
void mask_row(float* s, int64_t qi, int64_t j0, int64_t nk, const int32_t* seg, int64_t window,
              int64_t width = kTile) {
  const int64_t n = std::min(nk, width);
  if (window > 0)
    for (int64_t j = 0; j < n && j0 + j <= qi - window; ++j) s[j] = kNegInf;
  if (seg) {
    const int32_t sq = seg[qi];
    const int32_t* sk = seg + j0;
    for (int64_t j = 0; j < n; ++j) s[j] = (j0 + j > qi || sk[j] != sq) ? kNegInf : s[j];
  } else {
    for (int64_t j = 0; j < n; ++j) s[j] = (j0 + j > qi) ? kNegInf : s[j];
  }
  for (int64_t j = nk; j < width; ++j) s[j] = kNegInf;
}

// Horizontal max / sum of one vector by a shuffle tree (log2 steps, fixed order, so
// deterministic). Lane-by-lane extraction cost as much as the exp of the whole row. The lane
// indices are built from a parameter pack so they are compile-time constants (one vpermps).
template <int W, int... I>
vf rotate(vf v, std::integer_sequence<int, I...>) {
  return __builtin_shuffle(v, vi{((I + W) & (kVL - 1))...});
}
template <int W>
vf tree_max(vf v) {
  if constexpr (W == 0) {
    return v;
  } else {
    return tree_max<W / 2>(vmax(v, rotate<W>(v, std::make_integer_sequence<int, kVL>{})));
  }
}
template <int W>
vf tree_sum(vf v) {
  if constexpr (W == 0) {
    return v;
  } else {
    return tree_sum<W / 2>(v + rotate<W>(v, std::make_integer_sequence<int, kVL>{}));
  }
}
float hmax(vf v) { return tree_max<kVL / 2>(v)[0]; }
float hsum(vf v) { return tree_sum<kVL / 2>(v)[0]; }

constexpr int kTV = kTile / kVL;  // vectors per score row

// The vectors of query row i's scores in a masked (query tile i0, key tile j0) block that may
// hold a key the query sees: every key from its key_end on is masked (after the query's position,
// or past a partial tile), so the vectors wholly past it hold only -inf, their P is exactly 0
// (vexp2 of -inf), and their exps are skipped. On the diagonal tiles that is 44% of the exps.
int live_vectors(const Geo& g, int64_t i0, int64_t i, int64_t j0, int64_t nk) {
  return int((key_end(g, i0, j0, nk, i, 1) + kVL - 1) / kVL);
}

// Per-thread forward scratch, sized for one work item.
struct FwdScratch {
  Buffer<float> buf;
  float *kt, *v, *s, *alpha, *q, *o, *m, *l;
  static int64_t floats(const Geo& g) {
    const int64_t tile = kTile * g.Dp;
    return 2 * tile + kTile * kTile + kTile + g.nrep * (2 * tile + 2 * kTile);
  }
  // bf16 path only (mm set): Q rows of the group's heads, K rows, K^T and V as bf16 pairs, and
  // P rounded to bf16 (attention_bf16_tiles.h layouts).
  Bf16Mm mm = nullptr;
  Buffer<uint32_t> wbuf;
  uint32_t *qw = nullptr, *krows = nullptr, *ktw = nullptr, *vw = nullptr, *pw = nullptr;
  static int64_t words(const Geo& g) {
    const int64_t tw = kTile * g.Dp / 2;
    return g.nrep * tw + 3 * tw + kTile * kTile / 2;
  }
  FwdScratch(const Geo& g, Bf16Mm bf16_mm) : mm(bf16_mm) {
    if (mm) {
      const int64_t tw = kTile * g.Dp / 2;
      wbuf.resize(size_t(words(g)));
      uint32_t* w = wbuf.data();
      qw = w, w += g.nrep * tw;
      krows = w, w += tw;
      ktw = w, w += tw;
      vw = w, w += tw;
      pw = w;
    }
    const int64_t tile = kTile * g.Dp;
    buf.resize(size_t(floats(g)));
    float* p = buf.data();
    kt = p, p += tile;
    v = p, p += tile;
    s = p, p += kTile * kTile;
    alpha = p, p += kTile;
    q = p, p += g.nrep * tile;
    o = p, p += g.nrep * tile;
    m = p, p += g.nrep * kTile;
    l = p;
  }
};

// s * c2, rounded, for the exp loop's s * c2 - m: the empty asm, which takes the product in a
// register, keeps g++ from fusing the two into an FMA. It never fused them while the loop shared
// the max pass's products (a fully unrolled row); keeping the rounding keeps P's bits, and
// recomputing beats holding eight products across the row max (they spill).
inline vf scaled_scores(const float* s, float c2) {
  vf x = vload(s) * c2;
#if defined(__x86_64__) || defined(__i386__)
  asm("" : "+v"(x));
#endif
  return x;
}

// Online-softmax update of one row of raw scores s (already masked): turns s into
// P = exp2(s*c2 - m_new), updates the row's max m and sum l, and sets the factor alpha the output
// row must be rescaled by. -inf - -inf cannot occur: a row that saw only masked keys so far uses 0
// as its reference max. With kCut only the first nv vectors are read (live_vectors: the rest are
// -inf) and the rest are set to P = 0; every other value is the uncut row's, bit for bit.
template <bool kCut>
inline void softmax_row(float* s, float& m, float& l, float& alpha, float c2, int nv) {
  const int n = kCut ? nv : kTV;
  vf mx = vsplat(kNegInf);
  for (int v = 0; v < n; ++v) mx = vmax(mx, vload(s + v * kVL) * c2);
  // max(mx, -inf) of the skipped vectors changes only a NaN lane (to -inf).
  if (kCut && n < kTV) mx = vmax(mx, vsplat(kNegInf));
  const float tmax = hmax(mx);
  const float m_new = tmax > m ? tmax : m;
  const float ref = m_new == kNegInf ? 0.0f : m_new;
  vf sum = vf{};
  for (int v = 0; v < n; ++v) {
    vf p = vexp2(scaled_scores(s + v * kVL, c2) - ref);
    vstore(s + v * kVL, p);
    sum += p;
  }
  // P of a skipped vector is +0; adding it to the sum (lanes >= +0) would change nothing.
  for (int v = n; v < kTV; ++v) vstore(s + v * kVL, vf{});
  alpha = m == m_new ? 1.0f : vexp2(vsplat(m - ref))[0];
  l = l * alpha + hsum(sum);
  m = m_new;
}

// softmax_row over the rows of a tile, all vectors, or only the live ones of each row (live
// set). One call per tile keeps the exp constants in registers.
void softmax_tile(float* s, float* m, float* l, float* alpha, int64_t rows, float c2,
                  const int* live = nullptr) {
  for (int64_t i = 0; i < rows; ++i, s += kTile) {
    if (live)
      softmax_row<true>(s, m[i], l[i], alpha[i], c2, live[i]);
    else
      softmax_row<false>(s, m[i], l[i], alpha[i], c2, kTV);
  }
}

// The end of a forward item: out = O / l and lse of every row of the group's heads.
template <class T>
void finish_forward_item(T* out, float* lse, const Geo& g, const FwdScratch& sc, int64_t b,
                         int64_t kvh, int64_t i0, int64_t mq) {
  const int64_t tile = kTile * g.Dp;
  for (int64_t r = 0; r < g.nrep; ++r) {
    const int64_t h = kvh * g.nrep + r;
    for (int64_t i = 0; i < mq; ++i) {
      const float l = sc.l[r * kTile + i], m = sc.m[r * kTile + i];
      // l == 0 only if a row saw no key (impossible with a causal mask): output 0, lse -inf.
      store_row(out + (b * g.T + i0 + i) * g.qs + h * g.D, sc.o + r * tile + i * g.Dp, g.D,
                l > 0.0f ? 1.0f / l : 0.0f);
      lse[(b * g.Hq + h) * g.T + i0 + i] = l > 0.0f ? (m + std::log2(l)) * kLn2 : kNegInf;
    }
  }
}

// forward_item with bf16 tile products: the same loop, Q, K and V packed as bf16 pairs, P
// rounded to bf16 for P V. Scores, the online softmax and the output accumulator stay f32.
void forward_item_bf16(bf16* out, float* lse, const bf16* q, const bf16* k, const bf16* v,
                       const int32_t* seg, const Geo& g, FwdScratch& sc, int64_t b, int64_t kvh,
                       int64_t qt) {
  const int64_t i0 = qt * kTile, mq = std::min<int64_t>(kTile, g.T - i0);
  const int64_t tile = kTile * g.Dp, dw = g.Dp / 2, tw = kTile * dw;
  const int64_t kd = (g.D + 1) / 2;  // pairs of the head dimension that are not all padding
  const float c2 = g.scale * kLog2e;
  const int32_t* segb = seg ? seg + b * g.Tk : nullptr;
  const QuerySpan span = query_span(g, i0, mq);
  for (int64_t r = 0; r < g.nrep; ++r) {
    const int64_t h = kvh * g.nrep + r;
    pack_rows(sc.qw + r * tw, dw, q + (b * g.T + i0) * g.qs + h * g.D, g.qs, mq, mq, g.D);
    std::memset(sc.o + r * tile, 0, sizeof(float) * mq * g.Dp);
    for (int64_t i = 0; i < mq; ++i) sc.m[r * kTile + i] = kNegInf, sc.l[r * kTile + i] = 0.0f;
  }
  for (int64_t kt = 0; kt <= span.last / kTile; ++kt) {
    const int64_t j0 = kt * kTile, nk = std::min<int64_t>(kTile, g.Tk - j0);
    if (tile_before_window(g, span, j0, nk)) continue;
    if (segb && !tile_has_pair(g, segb, i0, mq, j0, nk)) continue;
    const int64_t row0 = (b * g.Tk + j0) * g.ks + kvh * g.D;
    pack_rows(sc.krows, dw, k + row0, g.ks, nk, kTile, g.D);
    transpose_words(sc.ktw, sc.krows, dw, kTile);
    pack_row_pairs(sc.vw, g.Dp, v + row0, g.ks, nk, kTile, g.D);
    const bool masked = tile_needs_mask(g, span, j0, nk, segb);
    for (int64_t r = 0; r < g.nrep; ++r) {
      float* o = sc.o + r * tile;
      sc.mm(sc.s, kTile, sc.qw + r * tw, dw, sc.ktw, kTile, mq, kTile, kd, false);  // S = Q K^T
      if (masked)
        for (int64_t i = 0; i < mq; ++i)
          mask_row(sc.s + i * kTile, g.pos(i0 + i), j0, nk, segb, g.window);
      softmax_tile(sc.s, sc.m + r * kTile, sc.l + r * kTile, sc.alpha, mq, c2);
      for (int64_t i = 0; i < mq; ++i)
        if (sc.alpha[i] != 1.0f)
          for (int64_t d = 0; d < g.Dp; ++d) o[i * g.Dp + d] *= sc.alpha[i];
      // l sums the f32 P (above); P V reads P rounded to bf16 (relative error <= 2^-9 a weight).
      round_rows(sc.pw, sc.s, kTile, mq, kTile);
      sc.mm(o, g.Dp, sc.pw, kTile / 2, sc.vw, g.Dp, mq, g.Dp, (nk + 1) / 2, true);  // O += P V
    }
  }
  finish_forward_item(out, lse, g, sc, b, kvh, i0, mq);
}

template <class T>
void forward_item(T* out, float* lse, const T* q, const T* k, const T* v, const int32_t* seg,
                  const Geo& g, FwdScratch& sc, int64_t b, int64_t kvh, int64_t qt) {
  if constexpr (std::is_same_v<T, bf16>)
    if (sc.mm) return forward_item_bf16(out, lse, q, k, v, seg, g, sc, b, kvh, qt);
  const int64_t i0 = qt * kTile, mq = std::min<int64_t>(kTile, g.T - i0);
  const int64_t tile = kTile * g.Dp;
  const float c2 = g.scale * kLog2e;
  const int32_t* segb = seg ? seg + b * g.Tk : nullptr;
  const QuerySpan span = query_span(g, i0, mq);
  for (int64_t r = 0; r < g.nrep; ++r) {
    const int64_t h = kvh * g.nrep + r;
    load_rows(sc.q + r * tile, g.Dp, q + (b * g.T + i0) * g.qs + h * g.D, g.qs, mq, mq, g.D);
    std::memset(sc.o + r * tile, 0, sizeof(float) * mq * g.Dp);
    for (int64_t i = 0; i < mq; ++i) sc.m[r * kTile + i] = kNegInf, sc.l[r * kTile + i] = 0.0f;
  }
  // Key tiles after the last query's position are wholly masked: never visited.
  for (int64_t kt = 0; kt <= span.last / kTile; ++kt) {
    const int64_t j0 = kt * kTile, nk = std::min<int64_t>(kTile, g.Tk - j0);
    if (tile_before_window(g, span, j0, nk)) continue;
    if (segb && !tile_has_pair(g, segb, i0, mq, j0, nk)) continue;
    const T* kb = k + (b * g.Tk + j0) * g.ks + kvh * g.D;
    load_rows(sc.v, g.Dp, kb, g.ks, nk, kTile, g.D);  // K rows, staged in v's space
    transpose_tile(sc.kt, sc.v, g.Dp);
    load_rows(sc.v, g.Dp, v + (b * g.Tk + j0) * g.ks + kvh * g.D, g.ks, nk, kTile, g.D);
    const bool masked = tile_needs_mask(g, span, j0, nk, segb);
    int live[kTile];
    if (masked)
      for (int64_t i = 0; i < mq; ++i) live[i] = live_vectors(g, i0, i, j0, nk);
    for (int64_t r = 0; r < g.nrep; ++r) {
      float* o = sc.o + r * tile;
      // S = Q K^T; columns past a row block's last key are left stale: the mask overwrites them.
      mm<false>(sc.s, kTile, sc.q + r * tile, g.Dp, 1, sc.kt, kTile, mq, kTile,
                [&](int64_t i, int64_t rows) {
                  return Bounds{key_end(g, i0, j0, nk, i, rows), 0, g.D};
                });
      if (masked)
        for (int64_t i = 0; i < mq; ++i)
          mask_row(sc.s + i * kTile, g.pos(i0 + i), j0, nk, segb, g.window, live[i] * kVL);
      softmax_tile(sc.s, sc.m + r * kTile, sc.l + r * kTile, sc.alpha, mq, c2,
                   masked ? live : nullptr);
      // O = alpha O + P V over the keys each row block sees (the rest of P is 0); O's rows are
      // rescaled as the product loads them (x 1 where alpha is 1: the same bits).
      mm<true>(
          o, g.Dp, sc.s, kTile, 1, sc.v, g.Dp, mq, g.Dp,
          [&](int64_t i, int64_t rows) { return Bounds{g.Dp, 0, key_end(g, i0, j0, nk, i, rows)}; },
          sc.alpha);
    }
  }
  finish_forward_item(out, lse, g, sc, b, kvh, i0, mq);
}

// The fp32 backward runs kKeyBlock key tiles side by side (backward_item): each Q and dO tile it
// widens then serves that many key tiles. Each key tile has its own K, K^T, V^T, dK and dV.
constexpr int64_t kKeyBlock = 2;

// Per-thread backward scratch.
struct BwdScratch {
  Buffer<float> buf;
  // k, kt, vt, dk, dv: kKeyBlock tiles each (slot x at x * kTile * Dp); the bf16 path uses slot 0
  float *k, *kt, *vt, *dk, *dv, *q, *dout, *p, *ds;
  static int64_t floats(const Geo& g) {
    return (5 * kKeyBlock + 2) * kTile * g.Dp + 2 * kTile * kTile;
  }
  // bf16 path only (mm set), attention_bf16_tiles.h layouts. Per key tile: K and V rows, K^T and
  // V^T, K as row pairs; per step: Q and dO rows and row pairs, P^T, dS^T and dS in bf16.
  Bf16Mm mm = nullptr;
  Buffer<uint32_t> wbuf;
  uint32_t *krows, *ktw, *kpairs, *vrows, *vtw, *qw, *qpairs, *dow, *dopairs, *ptw, *dstw, *dsw;
  static int64_t words(const Geo& g) { return 9 * (kTile * g.Dp / 2) + 3 * (kTile * kTile / 2); }
  BwdScratch(const Geo& g, Bf16Mm bf16_mm) : mm(bf16_mm) {
    if (mm) {
      const int64_t tw = kTile * g.Dp / 2, sw = kTile * kTile / 2;
      wbuf.resize(size_t(words(g)));
      uint32_t* w = wbuf.data();
      for (uint32_t** t : {&krows, &ktw, &kpairs, &vrows, &vtw, &qw, &qpairs, &dow, &dopairs})
        *t = w, w += tw;
      for (uint32_t** t : {&ptw, &dstw, &dsw}) *t = w, w += sw;
    }
    const int64_t tile = kTile * g.Dp;
    buf.resize(size_t(floats(g)));
    float* x = buf.data();
    for (float** t : {&k, &kt, &vt, &dk, &dv}) *t = x, x += kKeyBlock * tile;
    for (float** t : {&q, &dout}) *t = x, x += tile;
    p = x, x += kTile * kTile;
    ds = x;
  }
};

// Recompute P from the scores in sc.p and turn the dP in sc.ds into dS, for rows 0..mq of a
// (query tile, key tile) block of head h: P = exp2(S c2 - lse log2 e) (masked entries 0) and
// dS = P (dP - Drow) scale (the softmax scale folded in: both dQ and dK need it).
void probs_and_score_grads(const float* lse, const float* drow, const int32_t* segb, const Geo& g,
                           BwdScratch& sc, int64_t b, int64_t h, int64_t i0, int64_t mq,
                           int64_t j0, int64_t nk) {
  const float c2 = g.scale * kLog2e;
  const bool masked = tile_needs_mask(g, query_span(g, i0, mq), j0, nk, segb);
  const float* lse_h = lse + (b * g.Hq + h) * g.T + i0;
  const float* drow_h = drow + (b * g.Hq + h) * g.T + i0;
  for (int64_t i = 0; i < mq; ++i) {
    float* s = sc.p + i * kTile;
    float* dp = sc.ds + i * kTile;
    // Only the live vectors need exps; P of the rest is exactly +0 (live_vectors).
    const int n = masked ? live_vectors(g, i0, i, j0, nk) : kTV;
    if (masked) mask_row(s, g.pos(i0 + i), j0, nk, segb, g.window, n * kVL);
    // A row without keys has lse = -inf; +inf as reference makes its P exactly 0, not NaN.
    const float ref = lse_h[i] == kNegInf ? -kNegInf : lse_h[i] * kLog2e;
    const float dr = drow_h[i];
    for (int v = 0; v < n; ++v) {
      vf p = vexp2(vload(s + v * kVL) * c2 - ref);
      vstore(s + v * kVL, p);
      vstore(dp + v * kVL, p * (vload(dp + v * kVL) - dr) * g.scale);
    }
    // dS there is still formed as P (dP - Drow) scale: 0 times a stale dP keeps its sign bit.
    for (int v = n; v < kTV; ++v) {
      const vf p = vf{};
      vstore(s + v * kVL, p);
      vstore(dp + v * kVL, p * (vload(dp + v * kVL) - dr) * g.scale);
    }
  }
}

// A key tile's K and V for the bf16 backward: rows, transposed (K^T, V^T) and K as row pairs.
void load_key_tile_bf16(const bf16* k, const bf16* v, const Geo& g, BwdScratch& sc, int64_t row0,
                        int64_t nk) {
  const int64_t dw = g.Dp / 2;
  pack_rows(sc.krows, dw, k + row0, g.ks, nk, kTile, g.D);
  transpose_words(sc.ktw, sc.krows, dw, kTile);
  pack_row_pairs(sc.kpairs, g.Dp, k + row0, g.ks, nk, kTile, g.D);
  pack_rows(sc.vrows, dw, v + row0, g.ks, nk, kTile, g.D);
  transpose_words(sc.vtw, sc.vrows, dw, kTile);
}

// backward_step with bf16 tile products: Q, dO, K and V packed as bf16 pairs; P and dS computed
// in f32 as in the fp32 path, then rounded to bf16 for the products they feed (dV, dK, dQ).
void backward_step_bf16(const bf16* dout, const float* lse, const float* drow, const bf16* q,
                        const int32_t* segb, const Geo& g, BwdScratch& sc, float* dq_acc,
                        int64_t b, int64_t h, int64_t qt, int64_t kt) {
  const int64_t i0 = qt * kTile, mq = std::min<int64_t>(kTile, g.T - i0);
  const int64_t j0 = kt * kTile, nk = std::min<int64_t>(kTile, g.Tk - j0);
  const int64_t dw = g.Dp / 2, kd = (g.D + 1) / 2;
  const int64_t mq2 = mq + (mq & 1);  // queries (the summed k of dV and dK) padded to pairs
  const bf16* qrow = q + (b * g.T + i0) * g.qs + h * g.D;
  const bf16* drow_o = dout + (b * g.T + i0) * g.qs + h * g.D;
  pack_rows(sc.qw, dw, qrow, g.qs, mq, mq, g.D);
  pack_rows(sc.dow, dw, drow_o, g.qs, mq, mq, g.D);
  pack_row_pairs(sc.qpairs, g.Dp, qrow, g.qs, mq, mq2, g.D);
  pack_row_pairs(sc.dopairs, g.Dp, drow_o, g.qs, mq, mq2, g.D);
  sc.mm(sc.p, kTile, sc.qw, dw, sc.ktw, kTile, mq, kTile, kd, false);    // S = Q K^T
  sc.mm(sc.ds, kTile, sc.dow, dw, sc.vtw, kTile, mq, kTile, kd, false);  // dP = dO V^T
  probs_and_score_grads(lse, drow, segb, g, sc, b, h, i0, mq, j0, nk);
  round_transposed(sc.ptw, sc.p, kTile, mq, mq2, nk);
  round_transposed(sc.dstw, sc.ds, kTile, mq, mq2, nk);
  round_rows(sc.dsw, sc.ds, kTile, mq, kTile);
  sc.mm(sc.dv, g.Dp, sc.ptw, mq2 / 2, sc.dopairs, g.Dp, nk, g.Dp, mq2 / 2, true);  // dV += P^T dO
  sc.mm(sc.dk, g.Dp, sc.dstw, mq2 / 2, sc.qpairs, g.Dp, nk, g.Dp, mq2 / 2, true);  // dK += dS^T Q
  sc.mm(dq_acc + i0 * g.Dp, g.Dp, sc.dsw, kTile / 2, sc.kpairs, g.Dp, mq, g.Dp, (nk + 1) / 2,
        true);  // dQ += dS K
}

// One (query tile, key tile) step of the backward for query head h: recompute P, form dS, and
// accumulate dV, dK (item-owned tiles) and dQ (the item's f32 accumulator).
// In the fp32 path the key tile is the one in slot `slot` of the scratch, and the Q and dO tiles
// are widened only when `staged` is false (then set): the key tiles of a block share them.
template <class T>
void backward_step(const T* dout, const float* lse, const float* drow, const T* q,
                   const int32_t* segb, const Geo& g, BwdScratch& sc, float* dq_acc, int64_t b,
                   int64_t h, int64_t qt, int64_t kt, int64_t slot, bool& staged) {
  if constexpr (std::is_same_v<T, bf16>)
    if (sc.mm) return backward_step_bf16(dout, lse, drow, q, segb, g, sc, dq_acc, b, h, qt, kt);
  const int64_t i0 = qt * kTile, mq = std::min<int64_t>(kTile, g.T - i0);
  const int64_t j0 = kt * kTile, nk = std::min<int64_t>(kTile, g.Tk - j0);
  if (!staged) {
    load_rows(sc.q, g.Dp, q + (b * g.T + i0) * g.qs + h * g.D, g.qs, mq, mq, g.D);
    load_rows(sc.dout, g.Dp, dout + (b * g.T + i0) * g.qs + h * g.D, g.qs, mq, mq, g.D);
    staged = true;
  }
  const int64_t tile = kTile * g.Dp;
  const float *sk = sc.k + slot * tile, *skt = sc.kt + slot * tile, *svt = sc.vt + slot * tile;
  float *sdk = sc.dk + slot * tile, *sdv = sc.dv + slot * tile;
  // The causal cut (key_end, query_begin) skips products the mask makes zero. Columns of S and dP
  // past a row block's keys are left stale: the mask sets P there to 0, so dS = 0 (dP - Drow) is
  // 0 too (stale dP is a finite earlier value: the scratch starts zeroed).
  const auto keys = [&](int64_t i, int64_t rows) {
    return Bounds{key_end(g, i0, j0, nk, i, rows), 0, g.D};
  };
  const auto queries = [&](int64_t j, int64_t) {
    return Bounds{g.Dp, query_begin(g, i0, mq, j0, j), mq};
  };
  mm<false>(sc.p, kTile, sc.q, g.Dp, 1, skt, kTile, mq, kTile, keys);      // S = Q K^T
  mm<false>(sc.ds, kTile, sc.dout, g.Dp, 1, svt, kTile, mq, kTile, keys);  // dP = dO V^T
  probs_and_score_grads(lse, drow, segb, g, sc, b, h, i0, mq, j0, nk);
  mm<true>(sdv, g.Dp, sc.p, 1, kTile, sc.dout, g.Dp, nk, g.Dp, queries);  // dV += P^T dO
  mm<true>(sdk, g.Dp, sc.ds, 1, kTile, sc.q, g.Dp, nk, g.Dp, queries);    // dK += dS^T Q
  mm<true>(dq_acc + i0 * g.Dp, g.Dp, sc.ds, kTile, 1, sk, g.Dp, mq, g.Dp,
           [&](int64_t i, int64_t rows) {
             return Bounds{g.Dp, 0, key_end(g, i0, j0, nk, i, rows)};
           });  // dQ += dS K
}

// An item's key tiles (those of its chunk) in ascending order, kKeyBlock at a time in the fp32
// path (one at a time in the bf16 path): the block's K and V are staged, then for every query head
// and query tile the Q and dO tiles are widened once and meet each key tile of the block. Every
// dK/dV tile still sums its terms in (head, query tile) order and every dQ tile in ascending key
// tile order, as one key tile at a time would, so the results are the same bit for bit.
template <class T, class G>
void backward_item(G* dk, G* dv, const T* dout, const float* lse, const float* drow, const T* q,
                   const T* k, const T* v, const int32_t* seg, const Geo& g, BwdScratch& sc,
                   float* dq_acc, int64_t b, int64_t kvh, int64_t chunk, int64_t nchunks) {
  const int32_t* segb = seg ? seg + b * g.Tk : nullptr;
  const int64_t tile = kTile * g.Dp;
  int64_t block = kKeyBlock;
  if constexpr (std::is_same_v<T, bf16>)
    if (sc.mm) block = 1;  // its packed key tiles have one slot
  int64_t kts[kKeyBlock];
  for (int64_t kt_next = 0; kt_next < g.nkt;) {
    // Key tile kt meets nt - kt query tiles (without context parallelism); tiles kt and nkt-1-kt
    // go to the same chunk so chunks get equal work.
    int64_t n = 0;
    for (; kt_next < g.nkt && n < block; ++kt_next)
      if (std::min(kt_next, g.nkt - 1 - kt_next) % nchunks == chunk) kts[n++] = kt_next;
    for (int64_t x = 0; x < n; ++x) {
      const int64_t j0 = kts[x] * kTile, nk = std::min<int64_t>(kTile, g.Tk - j0);
      const int64_t row0 = (b * g.Tk + j0) * g.ks + kvh * g.D;
      bool loaded = false;
      if constexpr (std::is_same_v<T, bf16>)
        if (sc.mm) load_key_tile_bf16(k, v, g, sc, row0, nk), loaded = true;
      if (!loaded) {
        load_rows(sc.k + x * tile, g.Dp, k + row0, g.ks, nk, kTile, g.D);
        transpose_tile(sc.kt + x * tile, sc.k + x * tile, g.Dp);
        load_rows(sc.dv + x * tile, g.Dp, v + row0, g.ks, nk, kTile, g.D);  // V rows, in dv's space
        transpose_tile(sc.vt + x * tile, sc.dv + x * tile, g.Dp);
      }
      std::memset(sc.dk + x * tile, 0, sizeof(float) * tile);
      std::memset(sc.dv + x * tile, 0, sizeof(float) * tile);
    }
    for (int64_t r = 0; r < g.nrep; ++r) {
      const int64_t h = kvh * g.nrep + r;
      float* dq_h = dq_acc + r * g.T * g.Dp;
      for (int64_t qt = 0; qt < g.nt; ++qt) {
        const int64_t i0 = qt * kTile, mq = std::min<int64_t>(kTile, g.T - i0);
        const QuerySpan span = query_span(g, i0, mq);
        bool staged = false;  // this (head, query tile)'s Q and dO in sc.q and sc.dout
        for (int64_t x = 0; x < n; ++x) {
          const int64_t j0 = kts[x] * kTile, nk = std::min<int64_t>(kTile, g.Tk - j0);
          if (span.last < j0) continue;  // every query before the tile's first key
          if (tile_before_window(g, span, j0, nk)) continue;  // so are later query tiles
          if (segb && !tile_has_pair(g, segb, i0, mq, j0, nk)) continue;
          backward_step(dout, lse, drow, q, segb, g, sc, dq_h, b, h, qt, kts[x], x, staged);
        }
      }
    }
    for (int64_t x = 0; x < n; ++x) {
      const int64_t j0 = kts[x] * kTile, nk = std::min<int64_t>(kTile, g.Tk - j0);
      const int64_t row0 = (b * g.Tk + j0) * g.ks + kvh * g.D;
      for (int64_t j = 0; j < nk; ++j) {
        store_row(dk + row0 + j * g.ks, sc.dk + x * tile + j * g.Dp, g.D, 1.0f);
        store_row(dv + row0 + j * g.ks, sc.dv + x * tile + j * g.Dp, g.D, 1.0f);
      }
    }
  }
}

// Split a (b, KV head) into key chunks only when there are too few pairs to feed the threads.
int64_t key_chunks(const Geo& g, int64_t threads) {
  const int64_t pairs = g.B * g.Hkv;
  return std::min<int64_t>((g.nkt + 1) / 2, std::max<int64_t>(1, (threads + pairs - 1) / pairs));
}

}  // namespace

template <class T>
void attention_forward(T* out, float* lse, const T* q, const T* k, const T* v,
                       const int32_t* segment, const AttentionShape& s) {
  check_shape(s);
  const Geo g(s);
  const Bf16Mm bf16_products = std::is_same_v<T, bf16> ? bf16_mm(bf16_path()) : nullptr;
  // Causal work per query tile grows with its index (qt + 1 key tiles), so an item is the pair
  // of tiles (u, nt-1-u): every item then costs nt + 1 tile products (the middle tile of an odd
  // nt alone costs about half), and a plain static schedule is balanced for any thread count.
  // Each item's result does not depend on which thread runs it.
  const int64_t halves = (g.nt + 1) / 2;
  const int64_t items = g.B * g.Hkv * halves;
#pragma omp parallel
  {
    FwdScratch sc(g, bf16_products);
#pragma omp for schedule(static)
    for (int64_t it = 0; it < items; ++it) {
      const int64_t u = it % halves, kvh = it / halves % g.Hkv, b = it / (halves * g.Hkv);
      forward_item(out, lse, q, k, v, segment, g, sc, b, kvh, g.nt - 1 - u);
      if (u != g.nt - 1 - u) forward_item(out, lse, q, k, v, segment, g, sc, b, kvh, u);
    }
  }
}

template <class T, class G>
void attention_backward(T* dq, G* dk, G* dv, const T* dout, const T* out, const float* lse,
                        const T* q, const T* k, const T* v, const int32_t* segment,
                        const AttentionShape& s) {
  check_shape(s);
  const Geo g(s);
  const Bf16Mm bf16_products = std::is_same_v<T, bf16> ? bf16_mm(bf16_path()) : nullptr;
  const int64_t pairs = g.B * g.Hkv, nchunks = key_chunks(g, omp_get_max_threads());
  const int64_t group = g.nrep * g.T * g.Dp;  // f32 dQ of one (b, KV head): [nrep, T, Dp]
  Buffer<float> drow(size_t(g.B * g.Hq * g.T));
  // Chunk partials [b, KV head, chunk, nrep, T, Dp], only when keys are split.
  Buffer<float> dq_part(nchunks > 1 ? size_t(pairs * nchunks * group) : 0);

  // Drow[b, h, t] = sum_d dO * O, the softmax-backward row term.
#pragma omp parallel for schedule(static)
  for (int64_t bt = 0; bt < g.B * g.T; ++bt) {
    const int64_t b = bt / g.T, t = bt % g.T;
    for (int64_t h = 0; h < g.Hq; ++h) {
      const T* o = out + bt * g.qs + h * g.D;
      const T* d = dout + bt * g.qs + h * g.D;
      float acc = 0.0f;
      // simd reduction: lane-wise partial sums in a fixed order, still deterministic.
#pragma omp simd reduction(+ : acc)
      for (int64_t i = 0; i < g.D; ++i) acc += to_float(o[i]) * to_float(d[i]);
      drow[(b * g.Hq + h) * g.T + t] = acc;
    }
  }

  const int64_t items = pairs * nchunks;
#pragma omp parallel
  {
    BwdScratch sc(g, bf16_products);
    Buffer<float> own(nchunks == 1 ? size_t(group) : 0);  // this thread's dQ accumulator
#pragma omp for schedule(static)  // items cost the same (see the chunk rule in backward_item)
    for (int64_t it = 0; it < items; ++it) {
      const int64_t chunk = it % nchunks, kvh = it / nchunks % g.Hkv, b = it / (nchunks * g.Hkv);
      float* acc = nchunks == 1 ? own.data() : dq_part.data() + it * group;
      if (nchunks == 1) own.zero();
      backward_item(dk, dv, dout, lse, drow.data(), q, k, v, segment, g, sc, acc, b, kvh, chunk,
                    nchunks);
      if (nchunks > 1) continue;
      for (int64_t r = 0; r < g.nrep; ++r)
        for (int64_t t = 0; t < g.T; ++t)
          store_row(dq + (b * g.T + t) * g.qs + (kvh * g.nrep + r) * g.D,
                    acc + (r * g.T + t) * g.Dp, g.D, 1.0f);
    }
  }
  if (nchunks == 1) return;

  // dQ = sum of the chunk partials, always in chunk order.
#pragma omp parallel for schedule(static)
  for (int64_t bt = 0; bt < g.B * g.T; ++bt) {
    const int64_t b = bt / g.T, t = bt % g.T;
    for (int64_t h = 0; h < g.Hq; ++h) {
      const int64_t kvh = h / g.nrep, r = h % g.nrep;
      const float* p0 = dq_part.data() + (b * g.Hkv + kvh) * nchunks * group + (r * g.T + t) * g.Dp;
      T* o = dq + bt * g.qs + h * g.D;
      for (int64_t i = 0; i < g.D; ++i) {
        float sum = p0[i];
        for (int64_t c = 1; c < nchunks; ++c) sum += p0[c * group + i];
        o[i] = from_float<T>(sum);
      }
    }
  }
}

#define MT_INSTANTIATE(T, G)                                                                 \
  template void attention_backward<T, G>(T*, G*, G*, const T*, const T*, const float*, const T*, \
                                         const T*, const T*, const int32_t*, const AttentionShape&);
template void attention_forward<float>(float*, float*, const float*, const float*, const float*,
                                       const int32_t*, const AttentionShape&);
template void attention_forward<bf16>(bf16*, float*, const bf16*, const bf16*, const bf16*,
                                      const int32_t*, const AttentionShape&);
MT_INSTANTIATE(float, float)
MT_INSTANTIATE(bf16, bf16)
MT_INSTANTIATE(bf16, float)  // f32 key gradients of bf16 keys (context parallelism's partials)
#undef MT_INSTANTIATE

int64_t attention_scratch_bytes(const AttentionShape& s, int64_t threads, bool backward) {
  const Geo g(s);
  const auto buffer = [](int64_t floats) { return floats > 0 ? (4 * floats + 63) / 64 * 64 : 0; };  // Buffer's
  // The bf16 products' word buffers (4 bytes each, as a float) whenever that path is chosen:
  // this count does not know the tensors' type, so an f32 model is over-counted by them then.
  const bool bf16 = bf16_path() != Bf16Path::kFp32;
  if (!backward)
    return threads * (buffer(FwdScratch::floats(g)) + (bf16 ? buffer(FwdScratch::words(g)) : 0));
  const int64_t pairs = g.B * g.Hkv, nchunks = key_chunks(g, threads), group = g.nrep * g.T * g.Dp;
  return buffer(g.B * g.Hq * g.T) + buffer(nchunks > 1 ? pairs * nchunks * group : 0) +
         threads * (buffer(BwdScratch::floats(g)) + buffer(nchunks == 1 ? group : 0) +
                    (bf16 ? buffer(BwdScratch::words(g)) : 0));
}

}  // namespace mt
