// The bf16 tile products of the CPU attention kernel (kernels/cpu/attention_bf16.h).
//
// The build and CI machines have AVX2 only, so the AVX512-BF16 products cannot run here. What is
// tested instead: (1) the software model of VDPBF16PS (bf16_dot.h) against hand-worked answers
// on the cases where an emulation could go wrong (the order of the two products, ties, DAZ, FTZ,
// NaN, inf), and against this CPU's own FMA run with MXCSR's DAZ and FTZ set, an independent
// oracle for the flush rules (a mutation check: without the model's tininess-after-rounding
// case, 6 of its 204840 cases differ); (2) the blocked tile product over that model against a plain triple loop over the
// same lane model, bit for bit; (3) the whole bf16 attention path, forward and backward, run on
// the model (MESHTRAIN_ATTENTION_BF16=emulate), and again with the AMX tile product on the model
// of TDPBF16PS (emulate-amx; the model itself: test_ops_attention_amx.cpp), against the reference
// backend's attention in double and against the fp32 path; (4) the path choice. Where the CPU
// does have AVX512-BF16 or AMX, one more test each checks the native products equal the model's
// bit for bit (skipped here: nothing in this file runs a native product on a CPU without it).
#include <gtest/gtest.h>
#include <omp.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "core/error.h"
#include "core/tensor.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/attention_bf16.h"
#include "kernels/cpu/bf16_dot.h"
#include "kernels/cpu/bf16_tile_product.h"
#include "kernels/reference/attention.h"
#include "bf16_pair_bits.h"

namespace mt {
namespace {

using attn::Bf16Path;
using attn::dpbf16_lane;

// ---- (1) the lane model ----------------------------------------------------------------------

using test::bits_of;
using test::pair;
using test::same_bits;
uint32_t pair_bits(uint16_t lo, uint16_t hi) { return uint32_t(lo) | uint32_t(hi) << 16; }

TEST(Bf16DotModel, SumsBothPairs) {
  // 1 + 3*5 + 2*4
  EXPECT_EQ(dpbf16_lane(1.0f, pair(2.0f, 3.0f), pair(4.0f, 5.0f)), 24.0f);
  // Negative and fractional values: -0.5 + (-1.5)(2) + (0.25)(-8)
  EXPECT_EQ(dpbf16_lane(-0.5f, pair(0.25f, -1.5f), pair(-8.0f, 2.0f)), -5.5f);
}

TEST(Bf16DotModel, UpperPairIsAddedFirst) {
  // acc = 2^24, upper product 1*1, lower product -2^12 * 2^12. Upper first (the SDM's order):
  // 2^24 + 1 rounds to 2^24 (tie to even), then - 2^24 = 0. Lower first would give 0 + 1 = 1.
  EXPECT_EQ(dpbf16_lane(0x1p24f, pair(-0x1p12f, 1.0f), pair(0x1p12f, 1.0f)), 0.0f);
  // Swapping the pairs' halves gives the other order's answer.
  EXPECT_EQ(dpbf16_lane(0x1p24f, pair(1.0f, -0x1p12f), pair(1.0f, 0x1p12f)), 1.0f);
}

TEST(Bf16DotModel, RoundsToNearestEven) {
  // 1 + 2^-24 is halfway between 1 and 1 + 2^-23: the even one, 1.
  EXPECT_EQ(dpbf16_lane(1.0f, pair(0.0f, 0x1p-12f), pair(0.0f, 0x1p-12f)), 1.0f);
  // (1 + 2^-23) + 2^-24 is halfway between 1 + 2^-23 and 1 + 2^-22: the even one, 1 + 2^-22.
  EXPECT_EQ(dpbf16_lane(1.0f + 0x1p-23f, pair(0.0f, 0x1p-12f), pair(0.0f, 0x1p-12f)), 1.0f + 0x1p-22f);
  // Just above halfway (2^-24 + 2^-31) rounds up.
  EXPECT_EQ(dpbf16_lane(1.0f, pair(0.0f, 0x1p-12f), pair(0.0f, 0x1.02p-12f)), 1.0f + 0x1p-23f);
  // Each product is added with one rounding (an FMA): the product 2^-140 is below the normal
  // range but is not flushed on its own; added to 2^-126 it is exact.
  EXPECT_EQ(dpbf16_lane(FLT_MIN, pair(0.0f, 0x1p-70f), pair(0.0f, 0x1p-70f)), FLT_MIN + 0x1p-140f);
}

TEST(Bf16DotModel, DenormalInputsAreZero) {
  const uint16_t tiny = 0x0001;  // the smallest bf16 denormal, 2^-133
  const uint16_t big = bits_of(0x1p100f);
  // 2^-133 * 2^100 would be 2^-33; DAZ reads the denormal as 0.
  EXPECT_EQ(dpbf16_lane(1.0f, pair_bits(tiny, 0), pair_bits(big, 0)), 1.0f);
  EXPECT_EQ(dpbf16_lane(1.0f, pair_bits(0, big), pair_bits(0, 0x8001)), 1.0f);  // -2^-133, upper
  // A denormal accumulator is read as zero too (+0: 0 + (+0) is +0).
  const float r = dpbf16_lane(0x1p-140f, 0, 0);
  EXPECT_TRUE(same_bits(r, 0.0f)) << r;
}

TEST(Bf16DotModel, TinyResultsFlushToZero) {
  // 2^-65 * 2^-65 = 2^-130, a denormal: flushed, keeping its sign.
  EXPECT_TRUE(same_bits(dpbf16_lane(0.0f, pair(0x1p-65f, 0.0f), pair(0x1p-65f, 0.0f)), 0.0f));
  EXPECT_TRUE(same_bits(dpbf16_lane(-0.0f, pair(-0x1p-65f, 0.0f), pair(0x1p-65f, 0.0f)), -0.0f));
  // Tininess after rounding (x86): 2^-126 - 2^-150 is representable with an unbounded exponent,
  // so it is tiny and flushed (a gradual-underflow fmaf alone would round it up to 2^-126);
  // 2^-126 - 2^-151 rounds to 2^-126 (a tie, to the even 2^-126) and stays.
  EXPECT_TRUE(same_bits(dpbf16_lane(FLT_MIN, pair(-0x1p-75f, 0.0f), pair(0x1p-75f, 0.0f)), 0.0f));
  EXPECT_EQ(dpbf16_lane(FLT_MIN, pair(-0x1p-76f, 0.0f), pair(0x1p-75f, 0.0f)), FLT_MIN);
  // Between the two steps too: the upper product's 2^-127 is flushed before the lower one adds
  // its 2^-127 (kept, the two would make the normal 2^-126).
  EXPECT_TRUE(same_bits(dpbf16_lane(0.0f, pair(0x1p-63f, 0x1p-63f), pair(0x1p-64f, 0x1p-64f)), 0.0f));
}

TEST(Bf16DotModel, InfinitiesAndNaNs) {
  const float inf = INFINITY;
  EXPECT_EQ(dpbf16_lane(1.0f, pair(0.0f, inf), pair(0.0f, 2.0f)), inf);
  EXPECT_EQ(dpbf16_lane(1.0f, pair(-inf, 0.0f), pair(2.0f, 0.0f)), -inf);
  EXPECT_TRUE(std::isnan(dpbf16_lane(1.0f, pair(0.0f, inf), pair(0.0f, 0.0f))));  // inf * 0
  EXPECT_TRUE(std::isnan(dpbf16_lane(1.0f, pair(-inf, inf), pair(1.0f, 1.0f))));  // inf - inf
  EXPECT_TRUE(std::isnan(dpbf16_lane(inf, pair(-inf, 0.0f), pair(1.0f, 0.0f))));  // acc inf - inf
  EXPECT_TRUE(std::isnan(dpbf16_lane(NAN, pair(1.0f, 1.0f), pair(1.0f, 1.0f))));
  EXPECT_TRUE(std::isnan(dpbf16_lane(1.0f, pair_bits(0x7fc0, 0), pair(1.0f, 0.0f))));
  // Overflow: 2^127 * 2^127 is +inf under round to nearest.
  EXPECT_EQ(dpbf16_lane(0.0f, pair(0x1p127f, 0.0f), pair(0x1p127f, 0.0f)), inf);
}

#if defined(__x86_64__) && defined(__FMA__)
// This CPU's own FMA with MXCSR's DAZ and FTZ set (and round to nearest): x86 hardware's flush
// rules, an oracle for the model's that shares no code with it. VDPBF16PS ignores MXCSR and
// always works this way; an ordinary FMA does so only when asked. noinline, inputs from memory:
// the arithmetic stays between the two MXCSR writes.
__attribute__((noinline)) void hardware_daz_ftz_lanes(const float* acc, const uint32_t* a,
                                                      const uint32_t* b, float* out, size_t n) {
  const unsigned saved = _mm_getcsr();
  _mm_setcsr((saved & ~0x6000u) | 0x8040u);  // RC = nearest, FTZ (bit 15), DAZ (bit 6)
  asm volatile("" ::: "memory");
  for (size_t i = 0; i < n; ++i) {
    auto f = [](uint32_t h) { return _mm_set_ss(attn::f32_bits((h & 0xffffu) << 16)); };
    __m128 r = _mm_fmadd_ss(f(a[i] >> 16), f(b[i] >> 16), _mm_set_ss(acc[i]));
    r = _mm_fmadd_ss(f(a[i]), f(b[i]), r);
    out[i] = _mm_cvtss_f32(r);
  }
  asm volatile("" ::: "memory");
  _mm_setcsr(saved);
}

TEST(Bf16DotModel, AgreesWithThisCpusFmaUnderDazFtz) {
  // Edge values (zeros, the underflow boundary, denormals, inf, NaN, the largest finite) in every
  // combination, then random pairs whose products land near 2^-126, where the flush rules act.
  const float vals[] = {0.0f, -0.0f, 1.0f, -1.0f, 0x1p-75f, -0x1p-75f, 0x1p-76f, 0x1p-63f,
                        0x1p-64f, 0x1p-65f, 0x1p-12f, 0x1.02p-12f, 0x1p127f, INFINITY, -INFINITY};
  std::vector<uint16_t> h;
  for (float v : vals) h.push_back(bits_of(v));
  for (uint16_t x : {0x0001, 0x8001, 0x007f, 0x0080, 0x7f7f, 0xff7f, 0x7fc0}) h.push_back(x);
  const float accs[] = {0.0f, -0.0f, FLT_MIN, -FLT_MIN, 0x1p-140f, FLT_MIN * (1 + 0x1p-23f),
                        1.0f, 0x1p24f, INFINITY, NAN};
  std::vector<float> acc;
  std::vector<uint32_t> a, b;
  for (float c : accs)
    for (uint16_t x : h)
      for (uint16_t y : h) acc.push_back(c), a.push_back(pair_bits(x, y)), b.push_back(pair_bits(y, x));
  std::mt19937 rng(9);
  auto near_boundary = [&](int lo, int hi) {  // a bf16 of random sign, mantissa, exponent in [lo, hi]
    const int e = std::uniform_int_distribution<int>(lo, hi)(rng);
    const uint32_t m = rng() & 0x7f, sign = rng() & 1;
    return uint16_t(sign << 15 | uint32_t(e + 127) << 7 | m);
  };
  for (int i = 0; i < 200000; ++i) {
    float c;
    const uint32_t cm = rng() & 0x7fffff, ce = std::uniform_int_distribution<uint32_t>(0, 3)(rng);
    const uint32_t cb = (rng() & 1) << 31 | ce << 23 | cm;  // denormal or near 2^-126
    std::memcpy(&c, &cb, 4);
    acc.push_back(c);
    a.push_back(pair_bits(near_boundary(-70, -56), near_boundary(-70, -56)));
    b.push_back(pair_bits(near_boundary(-70, -56), near_boundary(-70, -56)));
  }
  std::vector<float> hw(acc.size());
  hardware_daz_ftz_lanes(acc.data(), a.data(), b.data(), hw.data(), acc.size());
  int bad = 0;
  for (size_t i = 0; i < acc.size(); ++i) {
    const float m = dpbf16_lane(acc[i], a[i], b[i]);
    const bool ok = std::isnan(m) ? std::isnan(hw[i]) : same_bits(m, hw[i]);
    if (!ok && ++bad <= 5)
      ADD_FAILURE() << std::hexfloat << "acc " << acc[i] << " a " << a[i] << " b " << b[i]
                    << ": model " << m << ", cpu " << hw[i];
  }
  EXPECT_EQ(bad, 0) << "of " << acc.size();
}
#endif

// ---- (2) the tile product over the model -----------------------------------------------------

TEST(Bf16TileProduct, BlockedEqualsPlainLoopBitForBit) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto word = [&]() { return pair_bits(float_to_bf16(nd(rng)).bits, float_to_bf16(nd(rng)).bits); };
  // M: 4-row blocks and remainders; N: 64-wide blocks and a 16-wide remainder.
  for (const int64_t M : {1, 5, 8}) {
    for (const int64_t N : {16, 80}) {
      const int64_t K2 = 7, lda = K2 + 3, ldb = N + 16, ldc = N + 32;
      std::vector<uint32_t> a(size_t(M * lda)), b(size_t(K2 * ldb));
      for (auto& w : a) w = word();
      for (auto& w : b) w = word();
      std::vector<float> c0(size_t(M * ldc));
      for (auto& x : c0) x = nd(rng);
      for (const bool acc : {false, true}) {
        std::vector<float> got = c0, want = c0;
        attn::bmm<attn::Bf16DotEmulated>(got.data(), ldc, a.data(), lda, b.data(), ldb, M, N, K2, acc);
        for (int64_t i = 0; i < M; ++i)
          for (int64_t n = 0; n < N; ++n) {
            float s = acc ? c0[size_t(i * ldc + n)] : 0.0f;
            for (int64_t p = 0; p < K2; ++p) s = dpbf16_lane(s, a[size_t(i * lda + p)], b[size_t(p * ldb + n)]);
            want[size_t(i * ldc + n)] = s;
          }
        ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0)
            << "M=" << M << " N=" << N << " accumulate=" << acc;
      }
    }
  }
}

// ---- (3) the attention path on the model against the reference backend -----------------------

// Sets MESHTRAIN_ATTENTION_BF16 for a scope (each test runs in its own process under ctest; the
// guard keeps a whole-binary run tidy too).
struct PathEnv {
  std::string saved;
  bool had;
  explicit PathEnv(const char* value) {
    const char* s = std::getenv("MESHTRAIN_ATTENTION_BF16");
    had = s != nullptr;
    if (had) saved = s;
    if (value) setenv("MESHTRAIN_ATTENTION_BF16", value, 1);
    else unsetenv("MESHTRAIN_ATTENTION_BF16");
  }
  ~PathEnv() {
    if (had) setenv("MESHTRAIN_ATTENTION_BF16", saved.c_str(), 1);
    else unsetenv("MESHTRAIN_ATTENTION_BF16");
  }
};

struct Case {
  AttentionShape s;
  std::vector<int32_t> seg;  // [B, cp T] or empty
  int64_t Tk() const { return s.T * s.cp; }
  size_t nq() const { return size_t(s.B * s.T * s.Hq * s.D); }
  size_t nk() const { return size_t(s.B * Tk() * s.Hkv * s.D); }
  const int32_t* segp() const { return seg.empty() ? nullptr : seg.data(); }
};

std::vector<bf16> randn_bf16(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<bf16> v(n);
  for (auto& x : v) x = float_to_bf16(nd(rng));
  return v;
}

struct Inputs {
  std::vector<bf16> q, k, v, dout;
  explicit Inputs(const Case& c)
      : q(randn_bf16(c.nq(), 1)), k(randn_bf16(c.nk(), 2)), v(randn_bf16(c.nk(), 3)),
        dout(randn_bf16(c.nq(), 4)) {}
};

// The CPU kernel on bf16 tensors (whichever path the environment picks).
struct Got {
  std::vector<bf16> out, dq;
  std::vector<float> lse, dk, dv;  // f32 key gradients (the <bf16, float> instantiation)
};
Got run_kernel(const Case& c, const Inputs& in) {
  Got g;
  g.out.resize(c.nq()), g.lse.assign(size_t(c.s.B * c.s.Hq * c.s.T), NAN);
  attention_forward(g.out.data(), g.lse.data(), in.q.data(), in.k.data(), in.v.data(), c.segp(), c.s);
  g.dq.resize(c.nq()), g.dk.assign(c.nk(), NAN), g.dv.assign(c.nk(), NAN);
  attention_backward<bf16, float>(g.dq.data(), g.dk.data(), g.dv.data(), in.dout.data(),
                                  g.out.data(), g.lse.data(), in.q.data(), in.k.data(),
                                  in.v.data(), c.segp(), c.s);
  return g;
}

// The reference backend's attention (double inside) on the same bf16 inputs, results in f32.
struct Want {
  std::vector<float> out, lse, dq, dk, dv;  // lse here [B, T, Hq]
};
Want run_reference(const Case& c, Inputs in) {
  const auto& s = c.s;
  const Device dev{DeviceKind::reference, 0};
  auto bt = [&](std::vector<bf16>& x, int64_t rows) { return Tensor(x.data(), DType::bf16, rows, int64_t(x.size()) / rows, dev); };
  auto ft = [&](std::vector<float>& x, int64_t rows) { return Tensor(x.data(), DType::f32, rows, int64_t(x.size()) / rows, dev); };
  Want w;
  w.out.resize(c.nq()), w.lse.resize(size_t(s.B * s.T * s.Hq));
  w.dq.resize(c.nq()), w.dk.resize(c.nk()), w.dv.resize(c.nk());
  std::vector<int32_t> seg = c.seg;
  const Tensor segt = seg.empty() ? Tensor() : Tensor(seg.data(), DType::i32, s.B, c.Tk(), dev);
  ref::AttentionSizes rs{s.B, s.T, s.Hq, s.Hkv, s.D, s.window, s.cp, s.cp_rank};
  const int64_t rq = s.B * s.T, rk = s.B * c.Tk();
  ref::attention_forward(ft(w.out, rq), ft(w.lse, rq), bt(in.q, rq), bt(in.k, rk), bt(in.v, rk), segt, rs);
  ref::attention_backward(ft(w.dq, rq), ft(w.dk, rk), ft(w.dv, rk), bt(in.dout, rq), bt(in.q, rq),
                          bt(in.k, rk), bt(in.v, rk), segt, rs);
  return w;
}

// Largest |got - want| / (1 + |want|).
template <class G>
double worst(const std::vector<G>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  double e = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = std::abs(double(to_float(got[i])) - want[i]) / (1.0 + std::abs(want[i]));
    e = std::isnan(d) ? INFINITY : std::max(e, d);
  }
  return e;
}

// Tolerances of the bf16 path, relative as in worst(), tighter than the fp32 path's on bf16
// tensors (OpsAttentionBf16.AgreesWithF32: 8e-3 and 2e-2). out is stored in bf16 (2^-9
// relative) and P is rounded to bf16 before P V (another <= 2^-9 a weight, averaging out over
// the keys); lse is f32 from f32 scores. The gradients read the bf16 output and round P and dS
// to bf16 before their products. Largest errors measured over the cases below (2026-12-07):
// out 2.9e-3 (fp32 path 2.5e-3), dq 8.2e-3 (8.2e-3), dk 8.5e-3 (6.6e-3), dv 7.3e-3 (1e-6: the
// fp32 path's dV uses P unrounded and is stored in f32 here) -- about 2x inside these.
constexpr double kTolOut = 6e-3, kTolLse = 1e-5, kTolGrad = 1.6e-2;

// One case on an emulated bf16 path ("emulate" or "emulate-amx") against the reference and, with
// the same tolerances, against the fp32 path on the same bf16 tensors.
void check_case(const Case& c, const char* what, const char* path) {
  SCOPED_TRACE(what);
  const Inputs in(c);
  const Want w = run_reference(c, in);
  Got g, f;
  {
    PathEnv env(path);
    g = run_kernel(c, in);
  }
  {
    PathEnv env("fp32");
    f = run_kernel(c, in);
  }
  auto widen = [](const auto& v) {
    std::vector<float> r(v.size());
    for (size_t i = 0; i < v.size(); ++i) r[i] = to_float(v[i]);
    return r;
  };
  EXPECT_LE(worst(g.out, widen(f.out)), kTolOut);
  EXPECT_LE(worst(g.dq, widen(f.dq)), kTolGrad);
  EXPECT_LE(worst(g.dk, f.dk), kTolGrad);
  EXPECT_LE(worst(g.dv, f.dv), kTolGrad);
  // lse: the kernel's [B, Hq, T] against the reference's [B, T, Hq].
  double lse_err = 0;
  for (int64_t b = 0; b < c.s.B; ++b)
    for (int64_t h = 0; h < c.s.Hq; ++h)
      for (int64_t t = 0; t < c.s.T; ++t) {
        const double want = w.lse[size_t((b * c.s.T + t) * c.s.Hq + h)];
        const double got = g.lse[size_t((b * c.s.Hq + h) * c.s.T + t)];
        lse_err = std::max(lse_err, std::abs(got - want) / (1 + std::abs(want)));
      }
  EXPECT_LE(worst(g.out, w.out), kTolOut);
  EXPECT_LE(lse_err, kTolLse);
  EXPECT_LE(worst(g.dq, w.dq), kTolGrad);
  EXPECT_LE(worst(g.dk, w.dk), kTolGrad);
  EXPECT_LE(worst(g.dv, w.dv), kTolGrad);
}

std::vector<int32_t> two_docs(int64_t B, int64_t T, int64_t cut) {
  std::vector<int32_t> seg(size_t(B * T));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) seg[size_t(b * T + t)] = t < cut ? 0 : 1;
  return seg;
}

// The emulated paths: VDPBF16PS's model (bmm) and TDPBF16PS's (the AMX tiling).
class OpsAttentionBf16Emulated : public testing::TestWithParam<const char*> {};
INSTANTIATE_TEST_SUITE_P(Paths, OpsAttentionBf16Emulated, testing::Values("emulate", "emulate-amx"),
                         [](const auto& info) {
                           return std::string(info.param) == "emulate" ? "vdpbf16ps" : "amx";
                         });

TEST_P(OpsAttentionBf16Emulated, MatchesReferenceCausalAndGqa) {
  const char* path = GetParam();
  // {B, T, Hq, Hkv, D}: GQA over 3 tiles with a partial last one; MHA; odd T and a head dim
  // that needs padding to 16 (24) and an odd one (7: a pair half-padded); a single token.
  check_case(Case{{2, 150, 4, 2, 64}, {}}, "GQA, T=150, D=64", path);
  check_case(Case{{1, 130, 4, 4, 32}, {}}, "MHA, T=130, D=32", path);
  check_case(Case{{2, 65, 6, 2, 24}, {}}, "GQA 3:1, T=65, D=24", path);
  check_case(Case{{1, 37, 2, 1, 7}, {}}, "T=37, D=7", path);
  check_case(Case{{1, 1, 2, 2, 8}, {}}, "one token", path);
}

TEST_P(OpsAttentionBf16Emulated, MatchesReferenceMasks) {
  const char* path = GetParam();
  // Packed documents, sliding windows (narrower and wider than a tile), both, and context
  // parallelism (rank 1 of 2: queries are chunks 1 and 2 of 4).
  check_case(Case{{2, 150, 4, 2, 24}, two_docs(2, 150, 90)}, "two documents", path);
  check_case(Case{{1, 200, 4, 1, 16, 40}, {}}, "window 40", path);
  check_case(Case{{2, 150, 4, 2, 8, 70}, two_docs(2, 150, 100)}, "window 70 and documents", path);
  AttentionShape cp{1, 66, 4, 2, 16};
  cp.cp = 2, cp.cp_rank = 1;
  check_case(Case{cp, {}}, "context parallel rank 1 of 2", path);
}

TEST_P(OpsAttentionBf16Emulated, KeyChunksAndThreadsGiveSameBits) {
  // One (b, KV head) pair: the backward splits keys into chunks when threads outnumber pairs.
  // Within the bf16 path, results are bit-identical run to run for a thread count, and within
  // tolerance across counts.
  const Case c{{1, 200, 3, 1, 16}, {}};
  const Inputs in(c);
  const Want w = run_reference(c, in);
  PathEnv env(GetParam());
  const int saved = omp_get_max_threads();
  for (int threads : {1, 3}) {
    SCOPED_TRACE(testing::Message() << threads << " threads");
    omp_set_num_threads(threads);
    const Got a = run_kernel(c, in), b = run_kernel(c, in);
    EXPECT_EQ(std::memcmp(a.out.data(), b.out.data(), a.out.size() * 2), 0);
    EXPECT_EQ(std::memcmp(a.dq.data(), b.dq.data(), a.dq.size() * 2), 0);
    EXPECT_EQ(std::memcmp(a.dk.data(), b.dk.data(), a.dk.size() * 4), 0);
    EXPECT_LE(worst(a.dq, w.dq), kTolGrad);
    EXPECT_LE(worst(a.dk, w.dk), kTolGrad);
    EXPECT_LE(worst(a.dv, w.dv), kTolGrad);
  }
  omp_set_num_threads(saved);
}

// ---- (4) the path choice ---------------------------------------------------------------------

TEST(OpsAttentionBf16Path, Choice) {
  using P = Bf16Path;
  // Every setting on the four kinds of CPU: (AVX512-BF16, AMX) each present or not. Only the
  // choice is made here; nothing runs.
  for (const bool avx : {false, true})
    for (const bool amx : {false, true}) {
      SCOPED_TRACE(testing::Message() << "avx512bf16 " << avx << ", amx " << amx);
      const P best = avx ? P::kAvx512Bf16 : P::kFp32;  // auto: AVX512 > fp32, AMX only by name
      EXPECT_EQ(attn::choose_bf16_path(nullptr, avx, amx), best);
      EXPECT_EQ(attn::choose_bf16_path("", avx, amx), best);
      EXPECT_EQ(attn::choose_bf16_path("auto", avx, amx), best);
      EXPECT_EQ(attn::choose_bf16_path("fp32", avx, amx), P::kFp32);
      EXPECT_EQ(attn::choose_bf16_path("off", avx, amx), P::kFp32);
      EXPECT_EQ(attn::choose_bf16_path("emulate", avx, amx), P::kEmulated);
      EXPECT_EQ(attn::choose_bf16_path("emulate-amx", avx, amx), P::kEmulatedAmx);
      if (avx) EXPECT_EQ(attn::choose_bf16_path("native", avx, amx), P::kAvx512Bf16);
      else EXPECT_THROW(attn::choose_bf16_path("native", avx, amx), Error);
      if (amx) EXPECT_EQ(attn::choose_bf16_path("amx", avx, amx), P::kAmx);
      else EXPECT_THROW(attn::choose_bf16_path("amx", avx, amx), Error);
      EXPECT_THROW(attn::choose_bf16_path("bf16", avx, amx), Error);
      EXPECT_THROW(attn::choose_bf16_path("AMX", avx, amx), Error);
    }
  try {
    attn::choose_bf16_path("amx", true, false);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("MESHTRAIN_ATTENTION_BF16=amx"), std::string::npos) << e.what();
  }
  EXPECT_EQ(attn::bf16_mm(P::kFp32), nullptr);
  EXPECT_NE(attn::bf16_mm(P::kEmulated), nullptr);
  EXPECT_NE(attn::bf16_mm(P::kEmulatedAmx), nullptr);
  EXPECT_EQ(attn::bf16_mm(P::kAmx), &attn::bf16_mm_amx);
  EXPECT_STREQ(attn::bf16_path_name(P::kEmulatedAmx), "emulated-amx");
  EXPECT_STREQ(attn::bf16_path_name(P::kAmx), "amx");
}

TEST(OpsAttentionBf16Path, DefaultOnThisCpuAndTheSwitchReachesTheKernel) {
  const Case c{{1, 70, 2, 1, 16}, {}};
  const Inputs in(c);
  Got dflt, fp32, emul, emul_amx;
  {
    PathEnv env(nullptr);
    // Without the instructions the default is fp32, never a native product; never AMX.
    const Bf16Path p = attn::bf16_path();
    EXPECT_EQ(p, attn::cpu_has_avx512bf16() ? Bf16Path::kAvx512Bf16 : Bf16Path::kFp32);
    dflt = run_kernel(c, in);
  }
  {
    PathEnv env("fp32");
    fp32 = run_kernel(c, in);
  }
  {
    PathEnv env("emulate");
    emul = run_kernel(c, in);
  }
  {
    PathEnv env("emulate-amx");
    emul_amx = run_kernel(c, in);
  }
  auto same = [](const Got& a, const Got& b) {
    return std::memcmp(a.out.data(), b.out.data(), a.out.size() * 2) == 0 &&
           std::memcmp(a.dq.data(), b.dq.data(), a.dq.size() * 2) == 0 &&
           std::memcmp(a.dk.data(), b.dk.data(), a.dk.size() * 4) == 0;
  };
  if (!attn::cpu_has_avx512bf16() && !attn::cpu_has_amx_bf16()) {
    EXPECT_TRUE(same(dflt, fp32));
  }
  // P rounded to bf16 moves some output bits: the switch did reach the kernel. The two models
  // sum in different orders, so they differ too.
  EXPECT_FALSE(same(emul, fp32));
  EXPECT_FALSE(same(emul_amx, fp32));
  EXPECT_FALSE(same(emul_amx, emul));
  if (!attn::cpu_has_amx_bf16()) {  // "amx" on a CPU or OS without it: an error, nothing runs
    PathEnv env("amx");
    std::vector<bf16> out(c.nq());
    std::vector<float> lse(size_t(c.s.Hq * c.s.T));
    EXPECT_THROW(attention_forward(out.data(), lse.data(), in.q.data(), in.k.data(), in.v.data(),
                                   nullptr, c.s),
                 Error);
  }
  {
    PathEnv env("sideways");
    std::vector<bf16> out(c.nq());
    std::vector<float> lse(size_t(c.s.Hq * c.s.T));
    EXPECT_THROW(attention_forward(out.data(), lse.data(), in.q.data(), in.k.data(), in.v.data(),
                                   nullptr, c.s),
                 Error);
  }
}

// The kernel on a native path and on its model, the same case: every output the same bits.
void expect_native_equals_model(const char* native_path, const char* model_path) {
  const Case c{{2, 150, 4, 2, 24}, two_docs(2, 150, 90)};
  const Inputs in(c);
  Got native, emul;
  {
    PathEnv env(native_path);
    native = run_kernel(c, in);
  }
  {
    PathEnv env(model_path);
    emul = run_kernel(c, in);
  }
  EXPECT_EQ(std::memcmp(native.out.data(), emul.out.data(), native.out.size() * 2), 0);
  EXPECT_EQ(std::memcmp(native.lse.data(), emul.lse.data(), native.lse.size() * 4), 0);
  EXPECT_EQ(std::memcmp(native.dq.data(), emul.dq.data(), native.dq.size() * 2), 0);
  EXPECT_EQ(std::memcmp(native.dk.data(), emul.dk.data(), native.dk.size() * 4), 0);
  EXPECT_EQ(std::memcmp(native.dv.data(), emul.dv.data(), native.dv.size() * 4), 0);
}

TEST(OpsAttentionBf16Native, EqualsTheModelBitForBit) {
  if (!attn::cpu_has_avx512bf16()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  expect_native_equals_model("native", "emulate");
}

// The check to run by hand on a host with AMX (MESHTRAIN_TEST_NATIVE_AMX=1, docs/engine.md): the
// tiles have never executed on one, and whether TDPBF16PS rounds as amx_tile_model.h reads the SDM
// only such a CPU can say; a CI host that happens to have AMX must not fail the build on that.
TEST(OpsAttentionBf16Amx, EqualsTheModelBitForBit) {
  const char* asked = std::getenv("MESHTRAIN_TEST_NATIVE_AMX");
  if (!asked || std::string(asked) != "1") GTEST_SKIP() << "set MESHTRAIN_TEST_NATIVE_AMX=1 on an AMX host";
  // Runs tile instructions: only where cpuid, XCR0 and the Linux permission all say AMX works.
  if (!attn::cpu_has_amx_bf16()) GTEST_SKIP() << "this CPU or OS offers no AMX-BF16";
  expect_native_equals_model("amx", "emulate-amx");
}

}  // namespace
}  // namespace mt
