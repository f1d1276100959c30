// The per-element math of kernels/device_math, which the GPU kernels run, checked on the host
// against the project's definitions: core/bf16 for rounding, core/nf4 for the 4-bit format, and
// the double-precision reference kernels (kernels/reference) for SwiGLU, RoPE and AdamW.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/bf16.h"
#include "core/error.h"
#include "core/nf4.h"
#include "core/rope_frequencies.h"
#include "core/tensor.h"
#include "core/tensor_box.h"
#include "kernels/device_math/adamw_element.h"
#include "kernels/device_math/box_offsets.h"
#include "kernels/device_math/bf16_round.h"
#include "kernels/device_math/nf4_block.h"
#include "kernels/device_math/rope_pair.h"
#include "kernels/device_math/swiglu_element.h"
#include "kernels/reference/optimizer.h"
#include "kernels/reference/rope.h"
#include "kernels/reference/swiglu.h"

namespace mt {
namespace {

Tensor host(std::vector<float>& v, int64_t rows, int64_t cols) {
  return {v.data(), DType::f32, rows, cols, Device{}};
}

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::vector<float> uniform(size_t n, float lo, float hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// ---- bf16 ---------------------------------------------------------------------------------------

TEST(DeviceMathBf16, EveryPatternWidensExactlyAndRoundsBackToItself) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = dm::bf16_bits_to_f32(uint16_t(b));
    const float core = to_float(bf16{uint16_t(b)});
    ASSERT_EQ(std::memcmp(&f, &core, 4), 0) << "bf16 pattern " << b;
    const uint16_t back = dm::f32_to_bf16_bits(f);
    if (std::isnan(f)) {
      // A NaN stays a NaN, quiet, with its sign: core's rule.
      ASSERT_EQ(back, float_to_bf16(f).bits) << "NaN pattern " << b;
      ASSERT_EQ(back & 0x40u, 0x40u);
      ASSERT_EQ(back & 0x8000u, b & 0x8000u);
    } else {
      ASSERT_EQ(back, uint16_t(b)) << "pattern " << b;
    }
  }
}

TEST(DeviceMathBf16, RoundingMatchesCoreOverEveryExponentAndTheTieCases) {
  // Every sign and exponent (the high 9 bits) and mantissa top bits, with the low 16 bits that
  // decide the rounding: zero, the smallest, just below, at and just above the half, the largest.
  const uint32_t lows[] = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xc000, 0xffff, 0x1234};
  for (uint32_t high = 0; high < 65536; ++high)
    for (uint32_t low : lows) {
      const float f = from_bits(high << 16 | low);
      ASSERT_EQ(dm::f32_to_bf16_bits(f), float_to_bf16(f).bits) << std::hex << (high << 16 | low);
    }
}

TEST(DeviceMathBf16, TiesGoToEvenAndSpecialValuesKeepTheirClass) {
  EXPECT_EQ(dm::f32_to_bf16_bits(from_bits(0x3f808000u)), 0x3f80);  // tie, even below: down
  EXPECT_EQ(dm::f32_to_bf16_bits(from_bits(0x3f818000u)), 0x3f82);  // tie, odd below: up
  EXPECT_EQ(dm::f32_to_bf16_bits(from_bits(0x3f808001u)), 0x3f81);  // just above the tie: up
  EXPECT_EQ(dm::f32_to_bf16_bits(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(dm::f32_to_bf16_bits(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(dm::f32_to_bf16_bits(std::numeric_limits<float>::max()), 0x7f80);  // overflows to inf
  EXPECT_EQ(dm::f32_to_bf16_bits(from_bits(0x00000001u)), 0x0000);  // smallest subnormal: to 0
  EXPECT_EQ(dm::f32_to_bf16_bits(from_bits(0x00018000u)), 0x0002);  // subnormal tie: to even
  EXPECT_EQ(dm::f32_to_bf16_bits(-0.0f), 0x8000);
  const uint16_t nan = dm::f32_to_bf16_bits(from_bits(0x7f800001u));  // signalling, payload low
  EXPECT_TRUE(std::isnan(dm::bf16_bits_to_f32(nan)));
}

// ---- SwiGLU -------------------------------------------------------------------------------------

TEST(DeviceMathSwiglu, ValueAndGradientsMatchTheReference) {
  const size_t n = 20000;
  std::vector<float> g = uniform(n, -12.0f, 12.0f, 1), u = uniform(n, -3.0f, 3.0f, 2),
                     d = uniform(n, -2.0f, 2.0f, 3), h(n), dg(n), du(n);
  ref::swiglu_forward(host(h, 1, n), host(g, 1, n), host(u, 1, n));
  ref::swiglu_backward(host(dg, 1, n), host(du, 1, n), host(d, 1, n), host(g, 1, n), host(u, 1, n));
  for (size_t i = 0; i < n; ++i) {
    const float s = dm::sigmoid(g[i]);
    const float value = dm::swiglu_value(g[i], u[i], s);
    const dm::SwigluGrads r = dm::swiglu_grads(g[i], u[i], d[i], s);
    EXPECT_NEAR(value, h[i], 1e-5f * (1.0f + std::abs(h[i]))) << "g " << g[i] << " u " << u[i];
    EXPECT_NEAR(r.dgate, dg[i], 1e-5f * (1.0f + std::abs(dg[i]))) << "g " << g[i];
    EXPECT_NEAR(r.dup, du[i], 1e-5f * (1.0f + std::abs(du[i]))) << "g " << g[i];
  }
  // The tails: silu(g) -> g for large g, -> 0 (from below) for very negative g; no NaN.
  EXPECT_FLOAT_EQ(dm::swiglu_value(100.0f, 1.0f, dm::sigmoid(100.0f)), 100.0f);
  EXPECT_EQ(dm::swiglu_value(-200.0f, 1.0f, dm::sigmoid(-200.0f)), -0.0f);
  EXPECT_FALSE(std::isnan(dm::swiglu_grads(-200.0f, 1.0f, 1.0f, dm::sigmoid(-200.0f)).dgate));
}

// ---- RoPE ---------------------------------------------------------------------------------------

// The GPU kernel's loop: every (token, head, pair) through rope_rotate.
void rope_with_pairs(std::vector<float>& x, const std::vector<float>& cos,
                     const std::vector<float>& sin, const std::vector<int32_t>& pos, int64_t H,
                     int64_t D, float direction) {
  const int64_t half = D / 2, N = int64_t(pos.size());
  for (int64_t e = 0; e < N * H * half; ++e) {
    const int64_t i = e % half, head = e / half, p = pos[size_t(head / H)];
    float& lo = x[size_t(head * D + i)];
    float& hi = x[size_t(head * D + i + half)];
    const dm::RopePair r = dm::rope_rotate(lo, hi, cos[size_t(p * half + i)],
                                           sin[size_t(p * half + i)], direction);
    lo = r.lo, hi = r.hi;
  }
}

TEST(DeviceMathRope, RotationMatchesTheReferenceForwardAndBackward) {
  const int64_t N = 37, H = 3, D = 64, max_pos = 4096;
  std::vector<float> cos(size_t(max_pos * D / 2)), sin(cos.size());
  rope_tables(cos.data(), sin.data(), max_pos, D, 500000.0f, RopeScaling{8.0f, 1.0f, 4.0f, 8192});
  std::vector<int32_t> pos(static_cast<size_t>(N));
  std::mt19937 rng(7);
  for (auto& p : pos) p = int32_t(rng() % max_pos);
  const Tensor tc = host(cos, max_pos, D / 2), ts = host(sin, max_pos, D / 2);
  const Tensor tp{pos.data(), DType::i32, N, 1, Device{}};
  for (const float direction : {1.0f, -1.0f}) {
    std::vector<float> x = uniform(size_t(N * H * D), -4.0f, 4.0f, 11), want = x;
    if (direction > 0) ref::rope_forward(host(want, N, H * D), tc, ts, tp, H);
    else ref::rope_backward(host(want, N, H * D), tc, ts, tp, H);
    rope_with_pairs(x, cos, sin, pos, H, D, direction);
    for (size_t i = 0; i < x.size(); ++i)
      ASSERT_NEAR(x[i], want[i], 2e-6f * (1.0f + std::abs(want[i]))) << "direction " << direction << " i " << i;
  }
}

// ---- AdamW --------------------------------------------------------------------------------------

TEST(DeviceMathAdamW, ElementMatchesTheReferenceOverManyElementsAndSteps) {
  const size_t n = 4096;
  const ref::AdamWStep step0{3e-3, 0.9, 0.95, 1e-8, 0.1, 1, 0.7, true};
  std::vector<float> w = uniform(n, -1.0f, 1.0f, 21), m(n, 0.0f), v(n, 0.0f);
  std::vector<float> rw = w, rm = m, rv = v;
  for (int64_t t = 1; t <= 50; ++t) {
    std::vector<float> g = uniform(n, -2.0f, 2.0f, unsigned(100 + t));
    ref::AdamWStep s = step0;
    s.t = t, s.decay = t % 3 != 0;  // some steps without decay
    ref::adamw_update(host(rw, 1, n), Tensor{}, host(g, 1, n), host(rm, 1, n), host(rv, 1, n), s);
    // The scalars as the backends derive them (cpu_backend.cpp's adamw_scalars).
    const AdamWScalars k{float(s.beta1), float(s.beta2), float(s.eps),
                         float(float(s.lr) / float(1.0 - std::pow(s.beta1, double(t)))),
                         float(std::sqrt(1.0 - std::pow(s.beta2, double(t)))),
                         s.decay ? 1.0f - float(s.lr) * float(s.weight_decay) : 1.0f,
                         float(s.grad_scale)};
    for (size_t i = 0; i < n; ++i) dm::adamw_element(w[i], m[i], v[i], g[i], k);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_NEAR(m[i], rm[i], 1e-6f * (1.0f + std::abs(rm[i]))) << "step " << t << " i " << i;
      ASSERT_NEAR(v[i], rv[i], 1e-6f * (1.0f + std::abs(rv[i]))) << "step " << t << " i " << i;
      ASSERT_NEAR(w[i], rw[i], 1e-5f * (1.0f + std::abs(rw[i]))) << "step " << t << " i " << i;
    }
  }
}

// ---- NF4 ----------------------------------------------------------------------------------------

TEST(DeviceMathNf4, RowLayoutMatchesCoreForEveryWidthUpToSeveralGroups) {
  for (int64_t cols = 1; cols <= 3 * nf4::kGroup * nf4::kBlock + 130; cols += (cols < 300 ? 1 : 61)) {
    const dm::Nf4RowLayout l = dm::nf4_row_layout(cols);
    ASSERT_EQ(l.blocks, nf4::blocks_per_row(cols)) << cols;
    ASSERT_EQ(l.groups, nf4::groups_per_row(cols)) << cols;
    ASSERT_EQ(l.bytes, nf4::row_bytes(cols)) << cols;
    ASSERT_EQ(l.groups * l.group_size >= l.blocks && (l.groups - 1) * l.group_size < l.blocks, true)
        << "every group non-empty, cols " << cols;
  }
}

// Decodes every weight as the GPU kernel does (nf4_weight) and compares with core's dequantiser
// bit for bit, in f32 and bf16.
TEST(DeviceMathNf4, DecodingMatchesCoreBitForBit) {
  dm::Nf4Codebook cb;
  for (int c = 0; c < 16; ++c) cb.value[c] = nf4::codebook()[size_t(c)];
  for (const int64_t cols : {int64_t(64), int64_t(100), int64_t(4096 + 17),
                             int64_t(2 * nf4::kGroup * nf4::kBlock + 3 * 64 + 5)}) {
    const int64_t rows = 5;
    std::vector<float> x = uniform(size_t(rows * cols), -0.2f, 0.2f, unsigned(cols));
    for (size_t i = 0; i < x.size(); i += 97) x[i] *= 40.0f;  // outliers, so maxima differ
    std::vector<uint8_t> packed(nf4::tensor_bytes(rows, cols));
    nf4::quantize_rows(packed.data(), x.data(), rows, cols);
    std::vector<float> want(x.size());
    std::vector<bf16> want16(x.size());
    nf4::dequantize_rows(want.data(), packed.data(), rows, cols);
    nf4::dequantize_rows(want16.data(), packed.data(), rows, cols);
    const dm::Nf4RowLayout l = dm::nf4_row_layout(cols);
    for (int64_t e = 0; e < rows * cols; ++e) {
      const float value = dm::nf4_weight(packed.data(), l, cb, cols, e);
      ASSERT_EQ(std::memcmp(&value, &want[size_t(e)], 4), 0) << "cols " << cols << " e " << e;
      ASSERT_EQ(dm::f32_to_bf16_bits(value), want16[size_t(e)].bits) << "cols " << cols << " e " << e;
    }
  }
}

TEST(DeviceMathNf4, EncodingMatchesCore) {
  dm::Nf4Codebook cb;
  for (int c = 0; c < 16; ++c) cb.value[c] = nf4::codebook()[size_t(c)];
  // Nearest code over a dense sweep past both ends, and exactly at every midpoint.
  for (int k = -110000; k <= 110000; ++k) {
    const float x = float(k) * 1e-5f;
    ASSERT_EQ(dm::nf4_nearest_code(x, cb), nf4::nearest_code(x)) << x;
  }
  for (int c = 0; c < 15; ++c) {
    const float mid = 0.5f * (cb.value[c] + cb.value[c + 1]);
    for (const float x : {std::nextafter(mid, -2.0f), mid, std::nextafter(mid, 2.0f)})
      ASSERT_EQ(dm::nf4_nearest_code(x, cb), nf4::nearest_code(x)) << "midpoint " << c;
  }
  // A record's parts: each group's scale and offset, each block's stored maximum and each code
  // byte, from nf4_block_max, nf4_group_stats, nf4_quantize_max and nf4_code_byte, against
  // core's record (groups of different spreads, and a row of equal maxima, where the scale is 0).
  const int64_t rows = 3, cols = 2 * nf4::kGroup * nf4::kBlock + 40;
  std::vector<float> x = uniform(size_t(rows * cols), -1.0f, 1.0f, 5);
  for (int64_t i = 0; i < cols; ++i) x[size_t(2 * cols + i)] = (i % 2 ? 0.5f : -0.5f);
  std::vector<uint8_t> packed(nf4::tensor_bytes(rows, cols));
  nf4::quantize_rows(packed.data(), x.data(), rows, cols);
  const dm::Nf4RowLayout l = dm::nf4_row_layout(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const nf4::RowView row{packed.data() + r * l.bytes, cols};
    std::vector<float> amax(size_t(l.blocks));
    for (int64_t b = 0; b < l.blocks; ++b)
      amax[size_t(b)] = dm::nf4_block_max(&x[size_t(r * cols + b * 64)], std::min<int64_t>(64, cols - b * 64));
    for (int64_t g = 0; g < l.groups; ++g) {  // scale and offset bit for bit
      const dm::Nf4GroupStats st = dm::nf4_group_stats(amax.data(), g * l.group_size,
                                                       std::min(l.blocks, (g + 1) * l.group_size));
      const float scale = row.scale(g), offset = row.offset(g);
      ASSERT_EQ(std::memcmp(&st.scale, &scale, 4), 0) << "row " << r << " group " << g;
      ASSERT_EQ(std::memcmp(&st.offset, &offset, 4), 0) << "row " << r << " group " << g;
    }
    for (int64_t b = 0; b < l.blocks; ++b) {
      const float a = amax[size_t(b)];
      const int64_t g = b / l.group_size;
      ASSERT_EQ(dm::nf4_quantize_max(a, row.scale(g), row.offset(g)), row.qmax(b))
          << "row " << r << " block " << b;
    }
    // Every code byte, the last block's padding included, as the GPU writes it.
    const uint8_t* codes = packed.data() + r * l.bytes + l.codes_at();
    for (int64_t j = 0; j < l.blocks * 32; ++j)
      ASSERT_EQ(dm::nf4_code_byte(&x[size_t(r * cols)], amax.data(), cols, j, cb), codes[j])
          << "row " << r << " code byte " << j;
  }
}

// ---- copy_box indexing ---------------------------------------------------------------------------

// Random regions of ranks 0-4, each inside a random source box and a random destination box of
// one tensor: copying element by element through box_offsets must give what core's copy_box
// gives, and leave the rest of the destination alone.
TEST(DeviceMathBox, OffsetsCopyWhatCoreCopies) {
  std::mt19937 rng(3);
  auto below = [&](int64_t x) { return x - int64_t(rng() % uint64_t(x + 1)); };  // in [0, x]
  auto above = [&](int64_t x, int64_t top) { return x + int64_t(rng() % uint64_t(top - x + 1)); };
  int copies = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const size_t rank = size_t(trial % 5);
    TensorBox src_box, dst_box, region;
    for (size_t d = 0; d < rank; ++d) {
      const int64_t extent = 1 + int64_t(rng() % 9);
      const int64_t r0 = int64_t(rng() % uint64_t(extent)), r1 = above(r0, extent);
      region.begin.push_back(r0), region.end.push_back(r1);
      src_box.begin.push_back(below(r0)), src_box.end.push_back(above(r1, extent));
      dst_box.begin.push_back(below(r0)), dst_box.end.push_back(above(r1, extent));
    }
    std::vector<float> src(size_t(src_box.numel()));
    for (size_t i = 0; i < src.size(); ++i) src[i] = float(i + 1);
    std::vector<float> want(size_t(dst_box.numel()), -1.0f), got = want;
    copy_box(src.data(), src_box, want.data(), dst_box, region);
    const dm::BoxPlan p = dm::box_plan(src_box, dst_box, region);
    ASSERT_EQ(p.numel, region.empty() ? 0 : region.numel());
    for (int64_t e = 0; e < p.numel; ++e) {
      const dm::BoxOffsets o = dm::box_offsets(p, e);
      ASSERT_TRUE(o.src >= 0 && o.src < int64_t(src.size()) && o.dst >= 0 && o.dst < int64_t(got.size()))
          << region.str() << " of " << src_box.str() << " -> " << dst_box.str();
      got[size_t(o.dst)] = src[size_t(o.src)];
    }
    ASSERT_EQ(got, want) << region.str() << " of " << src_box.str() << " -> " << dst_box.str();
    copies += p.numel > 0;
  }
  EXPECT_GT(copies, 200);  // most regions are not empty
  // A region outside a box, or a rank past the GPU's limit, is one clear error.
  EXPECT_THROW(dm::box_plan(TensorBox::whole({4}), TensorBox::whole({4}), TensorBox{{2}, {6}}), Error);
  const std::vector<int64_t> nine(9, 1);
  EXPECT_THROW(dm::box_plan(TensorBox::whole(nine), TensorBox::whole(nine), TensorBox::whole(nine)), Error);
}

}  // namespace
}  // namespace mt
