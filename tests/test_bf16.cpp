#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/bf16.h"

namespace mt {
namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f).bits, 0x3f80);
  EXPECT_EQ(float_to_bf16(from_bits(0x3f808000)).bits, 0x3f80);  // tie, even stays
  EXPECT_EQ(float_to_bf16(from_bits(0x3f818000)).bits, 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(float_to_bf16(from_bits(0x3f808001)).bits, 0x3f81);  // above the tie
  EXPECT_TRUE(std::isnan(to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isinf(to_float(float_to_bf16(std::numeric_limits<float>::infinity()))));
}

TEST(Bf16, BulkConversionMatchesScalar) {
  std::mt19937 gen(3);
  std::vector<float> src(100003);
  for (size_t i = 0; i < src.size(); ++i) {
    uint32_t u = gen();
    if (i % 3 == 0) u = (u & 0xffff0000u) | 0x8000u;  // exact ties
    src[i] = from_bits(u);
  }
  std::vector<bf16> dst(src.size());
  convert(dst.data(), src.data(), src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    if (std::isnan(src[i])) {
      ASSERT_TRUE(std::isnan(to_float(dst[i])));
    } else {
      ASSERT_EQ(dst[i].bits, float_to_bf16(src[i]).bits) << i;
    }
  }
  std::vector<float> back(src.size());
  convert(back.data(), dst.data(), dst.size());
  for (size_t i = 0; i < src.size(); ++i) {
    if (std::isnan(src[i])) continue;
    ASSERT_EQ(back[i], to_float(dst[i]));
  }
}

}  // namespace
}  // namespace mt
