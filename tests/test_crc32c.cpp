// CRC32C: the standard check value and RFC 3720's test vectors, the 8-byte fast path against a
// bit-at-a-time reference at every length and alignment, incremental use, the manifest's hex
// form, and checksums computed while writing equal to the file's checksum read back.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/crc32c.h"
#include "core/crc32c_io.h"
#include "core/error.h"
#include "io/safetensors_write.h"
#include "temp_dirs.h"

namespace mt {
namespace {

namespace fs = std::filesystem;

// The definition, one bit at a time: nothing shared with the table-driven implementation.
uint32_t reference_crc32c(const unsigned char* p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int b = 0; b < 8; ++b) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
  }
  return ~c;
}

TEST(Crc32c, StandardCheckValue) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c("", 0), 0u);
}

TEST(Crc32c, Rfc3720Vectors) {
  std::vector<unsigned char> v(32);
  EXPECT_EQ(crc32c(v.data(), v.size()), 0x8A9136AAu);  // 32 zero bytes
  std::fill(v.begin(), v.end(), 0xFF);
  EXPECT_EQ(crc32c(v.data(), v.size()), 0x62A8AB43u);
  for (size_t i = 0; i < 32; ++i) v[i] = (unsigned char)i;
  EXPECT_EQ(crc32c(v.data(), v.size()), 0x46DD794Eu);  // incrementing
  for (size_t i = 0; i < 32; ++i) v[i] = (unsigned char)(31 - i);
  EXPECT_EQ(crc32c(v.data(), v.size()), 0x113FDB5Cu);  // decrementing
}

TEST(Crc32c, MatchesBitwiseReferenceAtEveryLengthAlignmentAndSplit) {
  std::mt19937 rng(7);
  std::vector<unsigned char> buf(300);
  for (auto& b : buf) b = (unsigned char)rng();
  for (size_t off = 0; off < 8; ++off)
    for (size_t n = 0; off + n <= 80; ++n)
      ASSERT_EQ(crc32c(buf.data() + off, n), reference_crc32c(buf.data() + off, n)) << off << " " << n;
  const uint32_t whole = reference_crc32c(buf.data(), buf.size());
  for (size_t split = 0; split <= buf.size(); ++split)
    ASSERT_EQ(crc32c_extend(crc32c(buf.data(), split), buf.data() + split, buf.size() - split), whole) << split;
}

TEST(Crc32c, HexForm) {
  EXPECT_EQ(crc32c_hex(0xE3069283u), "e3069283");
  EXPECT_EQ(crc32c_hex(0x1Au), "0000001a");
  uint32_t v = 5;
  EXPECT_TRUE(parse_crc32c_hex("e3069283", v));
  EXPECT_EQ(v, 0xE3069283u);
  for (const char* bad : {"", "e306928", "e30692830", "E3069283", "e306928g", " 3069283"}) {
    EXPECT_FALSE(parse_crc32c_hex(bad, v)) << bad;
    EXPECT_EQ(v, 0xE3069283u) << "unchanged on failure";
  }
}

TEST(Crc32c, OstreamChecksumsWhatPassesThrough) {
  std::ostringstream target;
  Crc32cOstream out(target);
  out << "1234";
  out.put('5');
  out.write("6789", 4);
  EXPECT_TRUE(out.good());
  EXPECT_EQ(target.str(), "123456789");
  EXPECT_EQ(out.crc(), 0xE3069283u);
}

TEST(Crc32c, WrittenSafetensorsChecksumEqualsTheFileReadBack) {
  const fs::path dir = mt::testing::fresh_temp_dir("crc32c");
  std::vector<float> data(10000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = float(i) * 0.25f;
  const std::string p = (dir / "t.safetensors").string();
  const uint32_t written =
      write_safetensors(p, {{"x", "F32", {100, 100}, data.data(), data.size() * 4}}, {{"k", "v"}});
  EXPECT_EQ(written, crc32c_of_file(p));
  std::ifstream in(p, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(written, crc32c(bytes.data(), bytes.size()));
  try {
    crc32c_of_file((dir / "missing").string());
    ADD_FAILURE() << "missing file accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find((dir / "missing").string()), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mt
