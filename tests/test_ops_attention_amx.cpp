// The AMX tile product of the bf16 attention path (kernels/cpu/amx_tile_product.h) on the exact
// model of TDPBF16PS (kernels/cpu/amx_tile_model.h). No CPU here has AMX, so nothing in this file
// executes a tile instruction: (1) the model's element against hand-worked answers where it
// differs from VDPBF16PS (two partial sums meeting the destination once) and on the flush rules;
// (2) the tiled product over the emulated tiles against a plain loop over the modelled sum, bit
// for bit, on sizes that are not multiples of 16 (every edge path), accumulating or not, one and
// several OpenMP threads; (3) the emulated instructions fault where the hardware would.
// The attention path on the model (MESHTRAIN_ATTENTION_BF16=emulate-amx) is tested with the
// other bf16 paths in test_ops_attention_bf16.cpp.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/bf16.h"
#include "core/error.h"
#include "kernels/cpu/amx_tile_model.h"
#include "kernels/cpu/amx_tile_product.h"
#include "kernels/cpu/attention_bf16.h"
#include "bf16_pair_bits.h"

namespace mt {
namespace {

using attn::tdpbf16ps_element;

using test::bits_of;
using test::pair;  // (even, odd): a pair's lower element is the even one
using test::same_bits;

float element(float c, std::vector<uint32_t> a, std::vector<uint32_t> b) {
  return tdpbf16ps_element(c, a.data(), b.data(), 1, int64_t(a.size()));
}

// ---- (1) the element model -------------------------------------------------------------------

TEST(AmxTileModel, SumsEvenAndOddProductsOverAllPairs) {
  // c + (2*3 + 4*5) + (1*-1 + 0.5*8)
  EXPECT_EQ(element(1.0f, {pair(2.0f, 1.0f), pair(4.0f, 0.5f)}, {pair(3.0f, -1.0f), pair(5.0f, 8.0f)}),
            1.0f + 26.0f + 3.0f);
  EXPECT_EQ(element(-2.5f, {}, {}), -2.5f);  // no pairs: c + (0 + 0)
}

TEST(AmxTileModel, PartialSumsMeetTheDestinationOnce) {
  // c = 2^24, even product 1, odd product 1. TDPBF16PS (as the SDM writes it): 2^24 + (1 + 1) =
  // 2^24 + 2, exact. Folding each product into c in turn (VDPBF16PS's way) would lose both:
  // 2^24 + 1 rounds to 2^24 (tie to even), twice.
  EXPECT_EQ(element(0x1p24f, {pair(1.0f, 1.0f)}, {pair(1.0f, 1.0f)}), 0x1p24f + 2.0f);
  EXPECT_EQ(attn::dpbf16_lane(0x1p24f, pair(1.0f, 1.0f), pair(1.0f, 1.0f)), 0x1p24f);
}

TEST(AmxTileModel, FlushRules) {
  // Inputs: a denormal bf16 reads as zero (2^-133 * 2^100 would be 2^-33).
  EXPECT_EQ(element(1.0f, {0x0001u}, {pair(0x1p100f, 0.0f)}), 1.0f);
  // A denormal destination reads as zero: 2^-140 + 0 = +0.
  EXPECT_TRUE(same_bits(element(0x1p-140f, {0u}, {0u}), 0.0f));
  // A tiny partial sum is flushed: 2^-65 * 2^-65 = 2^-130 -> 0, then c + 0 = c.
  EXPECT_TRUE(same_bits(element(0.0f, {pair(0x1p-65f, 0.0f)}, {pair(0x1p-65f, 0.0f)}), 0.0f));
  // ... but an FMA keeps a tiny product exact when the sum is normal: 2^-126 + 2^-140.
  EXPECT_EQ(element(0.0f, {pair(0x1p-63f, 0.0f), pair(0x1p-70f, 0.0f)},
                    {pair(0x1p-63f, 0.0f), pair(0x1p-70f, 0.0f)}),
            0x1p-126f + 0x1p-140f);
  // The sum of the two partial sums is flushed before it meets c: 2^-125 and -(2^-125 - 2^-132)
  // meet as 2^-132, tiny, so c = 2^-126 stays (unflushed it would be 2^-126 + 2^-132).
  EXPECT_EQ(element(FLT_MIN, {pair(0x1p-62f, -0x1p-63f)}, {pair(0x1p-63f, 0x1.fcp-63f)}), FLT_MIN);
  // Round to nearest even on the final add: c = 1, sums 2^-24 (a tie): stays 1.
  EXPECT_EQ(element(1.0f, {pair(0x1p-12f, 0.0f)}, {pair(0x1p-12f, 0.0f)}), 1.0f);
}

TEST(AmxTileModel, InfinitiesAndNaNs) {
  EXPECT_EQ(element(1.0f, {pair(INFINITY, 0.0f)}, {pair(2.0f, 0.0f)}), INFINITY);
  EXPECT_TRUE(std::isnan(element(1.0f, {pair(INFINITY, -INFINITY)}, {pair(1.0f, 1.0f)})));  // even + odd
  EXPECT_TRUE(std::isnan(element(INFINITY, {pair(-INFINITY, 0.0f)}, {pair(1.0f, 0.0f)})));  // c + sums
  EXPECT_TRUE(std::isnan(element(NAN, {pair(1.0f, 1.0f)}, {pair(1.0f, 1.0f)})));
}

TEST(AmxTileModel, ZeroPairsChangeNoBit) {
  // The tiling pads k with zero pairs to a whole tile: the model says that changes nothing (a
  // partial sum from +0 is never -0). Random short sums, negative products and zeros included,
  // against the same sums padded to 16 pairs.
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto v = [&]() { return rng() % 5 == 0 ? bits_of(rng() % 2 ? 0.0f : -0.0f) : float_to_bf16(nd(rng)).bits; };
  for (int trial = 0; trial < 2000; ++trial) {
    const int K = 1 + int(rng() % 15);
    std::vector<uint32_t> a(16, 0), b(16, 0);
    for (int k = 0; k < K; ++k) a[size_t(k)] = v() | uint32_t(v()) << 16, b[size_t(k)] = v() | uint32_t(v()) << 16;
    const float c = trial % 3 == 0 ? -0.0f : nd(rng);
    const float s = tdpbf16ps_element(c, a.data(), b.data(), 1, K);
    const float p = tdpbf16ps_element(c, a.data(), b.data(), 1, 16);
    ASSERT_TRUE(same_bits(s, p)) << "K=" << K << " " << s << " vs " << p;
  }
}

// ---- (2) the tiled product on the emulated tiles ---------------------------------------------

// The modelled sum written out plainly: per output, k cut into instructions of 16 pairs (the last
// one shorter), each instruction's even and odd products summed apart from +0, then added to c.
void plain_product(float* c, int64_t ldc, const uint32_t* a, int64_t lda, const uint32_t* b,
                   int64_t ldb, int64_t M, int64_t N, int64_t K2, bool accumulate) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t n = 0; n < N; ++n) {
      float acc = accumulate ? c[i * ldc + n] : 0.0f;
      for (int64_t p0 = 0; p0 < K2; p0 += 16) {
        float even = 0.0f, odd = 0.0f;
        for (int64_t p = p0; p < std::min(K2, p0 + 16); ++p) {
          const uint32_t x = a[i * lda + p], y = b[p * ldb + n];
          even = attn::fma_daz_ftz(attn::bf16_in_daz(x), attn::bf16_in_daz(y), even);
          odd = attn::fma_daz_ftz(attn::bf16_in_daz(x >> 16), attn::bf16_in_daz(y >> 16), odd);
        }
        acc = attn::add_daz_ftz(acc, attn::add_daz_ftz(even, odd));
      }
      c[i * ldc + n] = acc;
    }
}

struct Operands {
  int64_t M, N, K2, lda, ldb, ldc;
  std::vector<uint32_t> a, b;
  std::vector<float> c0;
  Operands(int64_t m, int64_t n, int64_t k2, uint32_t seed)
      : M(m), N(n), K2(k2), lda(k2 + 3), ldb(n + 5), ldc(n + 7) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    auto word = [&]() { return uint32_t(float_to_bf16(nd(rng)).bits) | uint32_t(float_to_bf16(nd(rng)).bits) << 16; };
    a.resize(size_t(M * lda)), b.resize(size_t(std::max<int64_t>(K2, 1) * ldb)), c0.resize(size_t(M * ldc));
    for (auto& w : a) w = word();
    for (auto& w : b) w = word();
    for (auto& x : c0) x = nd(rng);
  }
};

TEST(AmxTileProduct, EqualsThePlainModelledSumBitForBit) {
  // M and N: one partial tile, one whole, a whole and a partial (two-tile blocks and single ones);
  // K2: under one instruction, exactly one, one and a bit, several with a partial last.
  int cases = 0;
  for (const int64_t M : {5, 16, 37})
    for (const int64_t N : {3, 16, 45})
      for (const int64_t K2 : {0, 7, 16, 17, 40}) {
        const Operands o(M, N, K2, uint32_t(M * 1000 + N * 10 + K2));
        for (const bool acc : {false, true}) {
          std::vector<float> got = o.c0, want = o.c0;
          attn::bf16_mm_amx_emulated(got.data(), o.ldc, o.a.data(), o.lda, o.b.data(), o.ldb, M, N, K2, acc);
          plain_product(want.data(), o.ldc, o.a.data(), o.lda, o.b.data(), o.ldb, M, N, K2, acc);
          // Bit for bit, including the padding between rows that must stay untouched.
          ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0)
              << "M=" << M << " N=" << N << " K2=" << K2 << " accumulate=" << acc;
          ++cases;
        }
      }
  EXPECT_EQ(cases, 90);
  // The product released its configuration: a tile instruction now faults.
  EXPECT_FALSE(attn::amx_emulated_state().configured);
}

TEST(AmxTileProduct, EachThreadConfiguresItsOwnTiles) {
  // Tile state is per thread (the emulation's as the hardware's): threads running products of
  // different shapes at once each get their own answers.
  const int saved = omp_get_max_threads();
  omp_set_num_threads(3);
  std::vector<Operands> ops;
  for (int t = 0; t < 6; ++t) ops.emplace_back(9 + 7 * t, 20 + 3 * t, 5 + 6 * t, uint32_t(t + 1));
  std::vector<std::vector<float>> got(ops.size());
  int bad = 0;
#pragma omp parallel for schedule(static, 1) reduction(+ : bad)
  for (int t = 0; t < int(ops.size()); ++t) {
    const Operands& o = ops[size_t(t)];
    got[size_t(t)] = o.c0;
    attn::bf16_mm_amx_emulated(got[size_t(t)].data(), o.ldc, o.a.data(), o.lda, o.b.data(), o.ldb,
                               o.M, o.N, o.K2, t % 2 == 1);
    bad += attn::amx_emulated_state().configured;
  }
  omp_set_num_threads(saved);
  EXPECT_EQ(bad, 0);
  for (size_t t = 0; t < ops.size(); ++t) {
    const Operands& o = ops[t];
    std::vector<float> want = o.c0;
    plain_product(want.data(), o.ldc, o.a.data(), o.lda, o.b.data(), o.ldb, o.M, o.N, o.K2, t % 2 == 1);
    EXPECT_EQ(std::memcmp(got[t].data(), want.data(), want.size() * 4), 0) << "product " << t;
  }
}

// ---- (3) the emulated instructions fault where the hardware would ------------------------------

attn::AmxTileConfig full_config() {
  attn::AmxTileConfig cfg;
  std::memset(&cfg, 0, sizeof cfg);
  cfg.palette_id = 1;
  for (int t = 0; t < 8; ++t) cfg.rows[t] = 16, cfg.colsb[t] = 64;
  return cfg;
}

TEST(AmxTileModel, EmulatedInstructionsFaultLikeTheHardware) {
  using T = attn::AmxTilesEmulated;
  float buf[256] = {};
  T::release();
  EXPECT_THROW(T::zero<0>(), Error);  // no configuration loaded
  attn::AmxTileConfig cfg = full_config();
  cfg.rows[3] = 17;
  EXPECT_THROW(T::config(&cfg), Error);  // past 16 rows
  cfg = full_config();
  cfg.palette_id = 2;
  EXPECT_THROW(T::config(&cfg), Error);
  cfg = full_config();
  cfg.colsb[9] = 4;  // palette 1 has 8 tiles
  EXPECT_THROW(T::config(&cfg), Error);
  cfg = full_config();
  cfg.rows[0] = 8;  // C with 8 rows, A with 16: shapes differ
  T::config(&cfg);
  EXPECT_THROW((T::dp<0, 4, 6>()), Error);
  cfg = full_config();
  cfg.colsb[4] = 32;  // A with 8 pairs a row, B with 16 pair rows
  T::config(&cfg);
  EXPECT_THROW((T::dp<1, 4, 6>()), Error);
  // A valid configuration works: partial rows load and store as configured.
  cfg = full_config();
  cfg.rows[2] = 3, cfg.colsb[2] = 8;
  T::config(&cfg);
  for (int i = 0; i < 256; ++i) buf[i] = float(i);
  T::load<2>(buf, 16 * 4);
  float out[256];
  for (float& x : out) x = -1.0f;
  T::store<2>(out, 16 * 4);
  for (int r = 0; r < 16; ++r)
    for (int q = 0; q < 16; ++q) ASSERT_EQ(out[r * 16 + q], r < 3 && q < 2 ? float(r * 16 + q) : -1.0f);
  T::release();
  EXPECT_THROW(T::store<2>(out, 64), Error);  // released
}

}  // namespace
}  // namespace mt
