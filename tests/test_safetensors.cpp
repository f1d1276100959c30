#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/bf16.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "io/safetensors_index.h"
#include "io/safetensors_write.h"
#include "temp_dirs.h"

namespace mt {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test.
class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* t = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = testing::fresh_temp_dir(std::string("st_") + t->test_suite_name() + "_" + t->name());
  }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // Writes `content` as is.
  std::string raw_file(const std::string& name, const std::string& content) const {
    std::ofstream(path(name), std::ios::binary) << content;
    return path(name);
  }
  // Writes the 8-byte little-endian length of `header`, the header, then `data`.
  std::string header_file(const std::string& name, const std::string& header,
                          const std::string& data = "") const {
    return raw_file(name, length_prefix(header.size()) + header + data);
  }

  static std::string length_prefix(uint64_t n) {
    std::string s(8, '\0');
    for (int i = 0; i < 8; ++i) s[size_t(i)] = char((n >> (8 * i)) & 0xff);
    return s;
  }

  fs::path dir_;
};

// The call must throw mt::Error with a one-line message naming `file` and containing `word`.
void expect_error(const std::function<void()>& f, const std::string& file, const std::string& word) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning '" << word << "'";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(file), std::string::npos) << "message does not name " << file << ": " << msg;
    EXPECT_NE(msg.find(word), std::string::npos) << "message lacks '" << word << "': " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "message is not one line: " << msg;
  }
}

std::string read_whole(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// ---- round trips ----

TEST_F(SafetensorsTest, RoundTripF32IsBitExact) {
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -3.25f, 1e-45f /* subnormal */, 3.4e38f,
                          std::numeric_limits<float>::infinity(), from_bits(0x7fc01234u) /* NaN payload */};
  std::mt19937 gen(1);
  for (int i = 0; i < 100; ++i) v.push_back(from_bits(gen()));
  const std::string p = path("f32.safetensors");
  write_safetensors(p, {{"w", "F32", {int64_t(v.size())}, v.data(), v.size() * 4}}, {{"format", "pt"}});

  SafetensorsFile f(p);
  EXPECT_EQ(f.names(), std::vector<std::string>{"w"});
  EXPECT_EQ(f.metadata().at("format"), "pt");
  const TensorInfo& t = f.info("w");
  EXPECT_EQ(t.dtype, FileDtype::F32);
  EXPECT_EQ(t.shape, std::vector<int64_t>{int64_t(v.size())});
  EXPECT_EQ(t.numel, v.size());
  std::vector<float> back(v.size());
  f.read_f32("w", back.data());
  EXPECT_EQ(std::memcmp(back.data(), v.data(), v.size() * 4), 0);
  std::vector<bf16> as_bf16(v.size());
  f.read_bf16("w", as_bf16.data());
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(as_bf16[i].bits, float_to_bf16(v[i]).bits) << i;
}

TEST_F(SafetensorsTest, StreamedWriteEqualsWholeWriteAndChecksSizes) {
  std::vector<float> a = {1.0f, -2.0f, 3.5f, 0.25f, 7.0f, -8.0f};
  std::vector<bf16> b = {float_to_bf16(0.5f), float_to_bf16(-1.5f)};
  std::vector<TensorOut> tensors = {{"a", "F32", {2, 3}, a.data(), a.size() * 4},
                                    {"b", "BF16", {2}, b.data(), b.size() * 2}};
  write_safetensors(path("whole.safetensors"), tensors, {{"format", "pt"}});
  auto produce = [&](size_t i) {
    const char* p = static_cast<const char*>(tensors[i].data);
    return std::vector<char>(p, p + tensors[i].bytes);
  };
  std::vector<TensorOut> specs = tensors;
  for (auto& t : specs) t.data = nullptr;  // the streamed writer needs only sizes up front
  write_safetensors_streamed(path("streamed.safetensors"), specs, produce, {{"format", "pt"}});
  auto slurp = [](const std::string& f) {
    std::ifstream in(f, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_EQ(slurp(path("streamed.safetensors")), slurp(path("whole.safetensors")));
  // A producer that returns the wrong number of bytes fails naming the tensor; nothing is left.
  try {
    write_safetensors_streamed(path("bad.safetensors"), specs, [](size_t) { return std::vector<char>(3); });
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'a' produced 3 bytes, expected 24"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(path("bad.safetensors")));
}

TEST_F(SafetensorsTest, RoundTripBf16IsBitExact) {
  std::mt19937 gen(2);
  std::vector<bf16> v(6 * 5);
  for (auto& x : v) x.bits = uint16_t(gen());
  const std::string p = path("bf16.safetensors");
  write_safetensors(p, {{"w", "BF16", {6, 5}, v.data(), v.size() * 2}});

  SafetensorsFile f(p);
  EXPECT_TRUE(f.metadata().empty());
  std::vector<bf16> back(v.size());
  f.read_bf16("w", back.data());
  EXPECT_EQ(std::memcmp(back.data(), v.data(), v.size() * 2), 0);
  std::vector<float> as_f32(v.size());
  f.read_f32("w", as_f32.data());
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(bits_of(as_f32[i]), bits_of(to_float(v[i]))) << i;
}

TEST_F(SafetensorsTest, RoundTripF16KnownValues) {
  struct Case {
    uint16_t half;
    float value;
  };
  const Case cases[] = {
      {0x0000, 0.0f},          {0x8000, -0.0f},          {0x3c00, 1.0f},
      {0xc000, -2.0f},         {0x3555, 0.333251953125f}, {0x7bff, 65504.0f},
      {0x0400, 0x1p-14f},      // smallest normal
      {0x0001, 0x1p-24f},      // smallest subnormal
      {0x03ff, 1023 * 0x1p-24f},  // largest subnormal
      {0x8200, -0x1p-15f},     // negative subnormal
      {0x7c00, std::numeric_limits<float>::infinity()},
      {0xfc00, -std::numeric_limits<float>::infinity()},
  };
  std::vector<uint16_t> halves;
  for (const auto& c : cases) halves.push_back(c.half);
  halves.push_back(0x7e00);  // NaN
  const std::string p = path("f16.safetensors");
  write_safetensors(p, {{"h", "F16", {int64_t(halves.size())}, halves.data(), halves.size() * 2}});

  SafetensorsFile f(p);
  std::vector<float> back(halves.size());
  f.read_f32("h", back.data());
  for (size_t i = 0; i < std::size(cases); ++i)
    EXPECT_EQ(bits_of(back[i]), bits_of(cases[i].value)) << "half 0x" << std::hex << cases[i].half;
  EXPECT_TRUE(std::isnan(back.back()));
  std::vector<bf16> as_bf16(halves.size());
  f.read_bf16("h", as_bf16.data());
  for (size_t i = 0; i < std::size(cases); ++i)
    EXPECT_EQ(as_bf16[i].bits, float_to_bf16(cases[i].value).bits) << i;
  EXPECT_TRUE(std::isnan(to_float(as_bf16.back())));
}

// ---- the file layout, byte for byte ----

TEST_F(SafetensorsTest, FormatWrittenFileMatchesSpecByteForByte) {
  const float a[2] = {1.0f, -2.0f};
  const uint16_t b[3] = {0x3f80, 0x4000, 0xc040};
  const std::string p = path("spec.safetensors");
  write_safetensors(p, {{"a", "F32", {2}, a, 8}, {"b", "BF16", {1, 3}, b, 6}}, {{"format", "pt"}});

  std::string header =
      R"({"__metadata__":{"format":"pt"},)"
      R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"BF16","shape":[1,3],"data_offsets":[8,14]}})";
  header.append((8 - header.size() % 8) % 8, ' ');  // padded with spaces: data 8-byte aligned
  std::string expected = length_prefix(header.size()) + header;
  expected.append(reinterpret_cast<const char*>(a), 8);
  expected.append(reinterpret_cast<const char*>(b), 6);

  const std::string got = read_whole(p);
  EXPECT_EQ(got, expected);
  EXPECT_EQ((8 + header.size()) % 8, 0u);
  EXPECT_EQ(safetensors_header_text(p, {{"a", "F32", {2}, a, 8}, {"b", "BF16", {1, 3}, b, 6}},
                                    {{"format", "pt"}}),
            header);
}

TEST_F(SafetensorsTest, FormatReadsHandBuiltFile) {
  // Entries out of data order, a scalar, an empty tensor, an I64 tensor, a gap before "late",
  // unpadded header, and trailing bytes: all valid.
  const std::string header =
      R"({"late":{"dtype":"F32","shape":[],"data_offsets":[20,24]},)"
      R"("ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},)"
      R"("empty":{"dtype":"BF16","shape":[0,4],"data_offsets":[16,16]},)"
      R"("__metadata__":{"k":"v"}})";
  std::string data(16, '\x01');
  data += std::string(4, '\0');  // gap
  const float late = 7.5f;
  data.append(reinterpret_cast<const char*>(&late), 4);
  data += "tail";
  const std::string p = header_file("hand.safetensors", header, data);

  SafetensorsFile f(p);
  EXPECT_EQ(f.names(), (std::vector<std::string>{"ids", "empty", "late"}));
  EXPECT_EQ(f.metadata(), (std::map<std::string, std::string>{{"k", "v"}}));
  const TensorInfo& t = f.info("late");
  EXPECT_TRUE(t.shape.empty());
  EXPECT_EQ(t.numel, 1u);
  EXPECT_EQ(t.file_offset, 8 + header.size() + 20);
  float x = 0;
  f.read_f32("late", &x);
  EXPECT_EQ(x, 7.5f);
  EXPECT_EQ(f.info("empty").numel, 0u);
  f.read_f32("empty", nullptr);  // nothing to read
  EXPECT_EQ(f.bytes("ids").size(), 16u);
  EXPECT_EQ(f.info("ids").dtype, FileDtype::I64);

  // The in-memory entry point the fuzzer uses agrees with the mmap path.
  const std::string whole = read_whole(p);
  SafetensorsHeader h = SafetensorsFile::parse_header(whole, "mem");
  EXPECT_EQ(h.tensors.size(), 3u);
  EXPECT_EQ(h.data_start, 8 + header.size());
}

TEST_F(SafetensorsTest, BytesIsZeroCopyViewIntoTheMapping) {
  std::vector<float> v(1000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i);
  const std::string p = path("zc.safetensors");
  write_safetensors(p, {{"a", "F32", {10}, v.data(), 40}, {"b", "F32", {990}, v.data() + 10, 3960}});
  SafetensorsFile f(p);
  auto a = f.bytes("a"), b = f.bytes("b");
  EXPECT_EQ(a.data(), f.bytes("a").data());  // the same memory every time, no copy
  EXPECT_EQ(b.data() - a.data(), 40);
  EXPECT_EQ(std::memcmp(b.data(), v.data() + 10, 3960), 0);

  // The pointer lies inside this process's mapping of the file.
  const std::string real = fs::canonical(p).string();
  std::ifstream maps("/proc/self/maps");
  bool inside = false;
  for (std::string line; std::getline(maps, line);) {
    if (line.size() < real.size() || line.compare(line.size() - real.size(), real.size(), real) != 0)
      continue;
    uintptr_t lo = 0, hi = 0;
    std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi);
    const auto ptr = reinterpret_cast<uintptr_t>(a.data());
    inside |= ptr >= lo && ptr < hi;
  }
  EXPECT_TRUE(inside) << "bytes() does not point into a mapping of " << real;
}

// ---- slices ----

TEST_F(SafetensorsTest, SliceRowsAndColumnsMatchFullRead) {
  const int64_t R = 5, C = 7;
  std::vector<float> f32(R * C);
  std::vector<bf16> b16(R * C);
  std::vector<uint16_t> f16(R * C);
  for (int64_t i = 0; i < R * C; ++i) {
    f32[size_t(i)] = float(i) * 0.5f - 3.0f;
    b16[size_t(i)] = float_to_bf16(float(i) - 10.0f);
    f16[size_t(i)] = uint16_t(0x3c00 + i);  // 1.0 and up
  }
  const std::string p = path("slice.safetensors");
  write_safetensors(p, {{"f32", "F32", {R, C}, f32.data(), f32.size() * 4},
                        {"bf16", "BF16", {R, C}, b16.data(), b16.size() * 2},
                        {"f16", "F16", {R, C}, f16.data(), f16.size() * 2},
                        {"cube", "F32", {5, 1, 7}, f32.data(), f32.size() * 4}});
  SafetensorsFile f(p);
  for (const char* name : {"f32", "bf16", "f16"}) {
    SCOPED_TRACE(name);
    std::vector<float> full(R * C);
    f.read_f32(name, full.data());
    std::vector<bf16> full16(R * C);
    f.read_bf16(name, full16.data());

    std::vector<float> rows(2 * C);
    f.read_rows_f32(name, 1, 2, rows.data());
    for (int64_t i = 0; i < 2 * C; ++i) EXPECT_EQ(rows[size_t(i)], full[size_t(C + i)]);
    std::vector<bf16> rows16(2 * C);
    f.read_rows_bf16(name, 3, 2, rows16.data());
    for (int64_t i = 0; i < 2 * C; ++i) EXPECT_EQ(rows16[size_t(i)].bits, full16[size_t(3 * C + i)].bits);

    std::vector<float> cols(R * 3);
    f.read_cols_f32(name, 2, 3, cols.data());
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < 3; ++c) EXPECT_EQ(cols[size_t(r * 3 + c)], full[size_t(r * C + 2 + c)]);
    std::vector<bf16> cols16(R * 2);
    f.read_cols_bf16(name, 5, 2, cols16.data());
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < 2; ++c)
        EXPECT_EQ(cols16[size_t(r * 2 + c)].bits, full16[size_t(r * C + 5 + c)].bits);

    f.read_rows_f32(name, R, 0, nullptr);  // empty slices at the end are fine
    f.read_cols_f32(name, C, 0, nullptr);
  }
  std::vector<float> cube_rows(2 * 7);
  f.read_rows_f32("cube", 3, 2, cube_rows.data());  // rows of any rank: along the first dimension
  EXPECT_EQ(cube_rows[0], f32[21]);

  expect_error([&] { f.read_rows_f32("f32", 4, 2, nullptr); }, p, "out of range");
  expect_error([&] { f.read_rows_f32("f32", -1, 1, nullptr); }, p, "out of range");
  expect_error([&] { f.read_cols_f32("f32", 6, 2, nullptr); }, p, "out of range");
  expect_error([&] { f.read_cols_f32("f32", 0, std::numeric_limits<int64_t>::max(), nullptr); }, p,
               "out of range");
  expect_error([&] { f.read_cols_f32("cube", 0, 1, nullptr); }, p, "2-D");
}

// ---- sharded checkpoints ----

TEST_F(SafetensorsTest, ShardedWriteThenCheckpointReadGivesSameTensors) {
  std::mt19937 gen(5);
  std::vector<std::vector<float>> data;
  std::vector<TensorOut> out;
  const int64_t rows[] = {4, 10, 1, 6, 3};
  for (size_t i = 0; i < std::size(rows); ++i) {
    data.emplace_back(size_t(rows[i] * 8));
    for (auto& x : data.back()) x = float(gen() % 1000) / 7.0f;
  }
  for (size_t i = 0; i < data.size(); ++i)
    out.push_back({"layer." + std::to_string(i) + ".weight", "F32", {rows[i], 8}, data[i].data(),
                   data[i].size() * 4});
  // 200 bytes a shard, tensors of 128, 320, 32, 192, 96 bytes: 128+320 > 200, 320 is too big and
  // goes alone, 32+192 > 200, 192+96 > 200, so five shards of one tensor each.
  const std::string ckpt = path("ckpt");
  auto written = write_sharded_safetensors(ckpt, out, 200, {{"format", "pt"}});
  ASSERT_EQ(written.size(), 6u);
  EXPECT_EQ(written[0], ckpt + "/model-00001-of-00005.safetensors");
  EXPECT_EQ(written[4], ckpt + "/model-00005-of-00005.safetensors");
  EXPECT_EQ(written[5], ckpt + "/model.safetensors.index.json");

  const auto index = nlohmann::json::parse(read_whole(written[5]));
  EXPECT_EQ(index["metadata"]["total_size"], 128 + 320 + 32 + 192 + 96);
  EXPECT_EQ(index["weight_map"]["layer.1.weight"], "model-00002-of-00005.safetensors");
  EXPECT_EQ(SafetensorsFile(written[0]).metadata().at("format"), "pt");

  SafetensorsCheckpoint c(ckpt);
  EXPECT_EQ(c.shard_paths().size(), 5u);
  EXPECT_EQ(c.metadata().at("total_size"), "768");
  EXPECT_EQ(c.names().size(), data.size());
  for (size_t i = 0; i < data.size(); ++i) {
    const std::string name = out[i].name;
    EXPECT_EQ(c.info(name).shape, out[i].shape);
    std::vector<float> back(data[i].size());
    c.read_f32(name, back.data());
    EXPECT_EQ(back, data[i]) << name;
    EXPECT_EQ(std::memcmp(c.bytes(name).data(), data[i].data(), data[i].size() * 4), 0);
  }
  std::vector<float> col(10);
  c.read_cols_f32("layer.1.weight", 3, 1, col.data());
  for (int r = 0; r < 10; ++r) EXPECT_EQ(col[size_t(r)], data[1][size_t(r * 8 + 3)]);

  // Two tensors in one shard when the limit allows it.
  auto two = write_sharded_safetensors(path("big"), out, 1 << 20);
  EXPECT_EQ(two.size(), 2u);
  EXPECT_EQ(SafetensorsCheckpoint(path("big")).names().size(), out.size());
}

TEST_F(SafetensorsTest, CheckpointOpensSingleFileOrItsDirectory) {
  const float v[3] = {1, 2, 3};
  fs::create_directories(path("m"));
  write_safetensors(path("m/model.safetensors"), {{"w", "F32", {3}, v, 12}}, {{"format", "pt"}});
  for (const std::string& p : {path("m"), path("m/model.safetensors")}) {
    SafetensorsCheckpoint c(p);
    EXPECT_EQ(c.names(), std::vector<std::string>{"w"});
    EXPECT_EQ(c.metadata().at("format"), "pt");
    float back[3];
    c.read_f32("w", back);
    EXPECT_EQ(back[2], 3.0f);
    expect_error([&] { c.info("nope"); }, p, "no tensor named");
  }
}

// ---- bad input: each case is one clear line naming the file ----

TEST_F(SafetensorsTest, ErrorsFileAndHeaderLength) {
  expect_error([&] { SafetensorsFile f(raw_file("short", "abc")); }, path("short"), "too short");
  expect_error([&] { SafetensorsFile f(raw_file("empty", "")); }, path("empty"), "too short");
  expect_error([&] { SafetensorsFile f(raw_file("past", length_prefix(1000) + "{}")); }, path("past"),
               "past the end");
  expect_error([&] { SafetensorsFile f(raw_file("huge", length_prefix(200'000'000) + "{}")); },
               path("huge"), "100 MB");
  expect_error([&] { SafetensorsFile f(path("missing")); }, path("missing"), "cannot open");
  expect_error([&] { SafetensorsFile f(dir_.string()); }, dir_.string(), "not a regular file");
}

TEST_F(SafetensorsTest, ErrorsHeaderNotJsonObject) {
  expect_error([&] { SafetensorsFile f(header_file("a", "{\"x\": ")); }, path("a"), "not valid JSON");
  expect_error([&] { SafetensorsFile f(header_file("b", std::string("{\0\xff}", 4))); }, path("b"),
               "not valid JSON");
  expect_error([&] { SafetensorsFile f(header_file("c", "[1, 2]")); }, path("c"), "not a JSON object");
  expect_error([&] { SafetensorsFile f(header_file("d", R"({"a": {"b": {"c": [[1]]}}})")); }, path("d"),
               "nests deeper");
}

TEST_F(SafetensorsTest, ErrorsEntryFieldsAndTypes) {
  struct Case {
    const char* entry;
    const char* word;
  };
  const Case cases[] = {
      {R"(3)", "not an object"},
      {R"({"shape":[2],"data_offsets":[0,8]})", "missing \"dtype\""},
      {R"({"dtype":"F32","data_offsets":[0,8]})", "missing \"shape\""},
      {R"({"dtype":"F32","shape":[2]})", "missing \"data_offsets\""},
      {R"({"dtype":5,"shape":[2],"data_offsets":[0,8]})", "\"dtype\" is not a string"},
      {R"({"dtype":"F32","shape":"2","data_offsets":[0,8]})", "\"shape\" is not an array"},
      {R"({"dtype":"F32","shape":[2.0],"data_offsets":[0,8]})", "non-integer"},
      {R"({"dtype":"F32","shape":[2],"data_offsets":[0]})", "pair of non-negative integers"},
      {R"({"dtype":"F32","shape":[2],"data_offsets":[-1,8]})", "pair of non-negative integers"},
      {R"({"dtype":"F32","shape":[2],"data_offsets":"0-8"})", "pair of non-negative integers"},
      {R"({"dtype":"F32","shape":[-2],"data_offsets":[0,8]})", "negative dimension -2"},
      {R"({"dtype":"Q4","shape":[2],"data_offsets":[0,8]})", "unknown dtype \"Q4\""},
      {R"({"dtype":"F32","shape":[2],"data_offsets":[0,16]})", "out of range"},
      {R"({"dtype":"F32","shape":[2],"data_offsets":[8,0]})", "begin after end"},
      {R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})", "size mismatch"},
      {R"({"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,8]})", "overflow"},
      {R"({"dtype":"U8","shape":[0,9223372036854775807,2],"data_offsets":[0,0]})", "overflow"},
      {R"({"dtype":"F32","shape":[9223372036854775808],"data_offsets":[0,8]})", "overflow"},
  };
  int i = 0;
  for (const auto& c : cases) {
    const std::string name = "case" + std::to_string(i++);
    const std::string p = header_file(name, std::string(R"({"w":)") + c.entry + "}", std::string(8, '\0'));
    SCOPED_TRACE(c.entry);
    expect_error([&] { SafetensorsFile f(p); }, p, c.word);
  }
}

TEST_F(SafetensorsTest, ErrorsOverlapDuplicatesAndMetadata) {
  const std::string data(16, '\0');
  const std::string overlap = header_file("overlap",
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", data);
  expect_error([&] { SafetensorsFile f(overlap); }, overlap, "overlap");
  const std::string inside = header_file("inside",
      R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
      R"("b":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})", data);
  expect_error([&] { SafetensorsFile f(inside); }, inside, "overlap");

  const std::string dup = header_file("dup",
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", data);
  expect_error([&] { SafetensorsFile f(dup); }, dup, "duplicate tensor name \"a\"");
  const std::string dup_key = header_file("dupkey",
      R"({"a":{"dtype":"F32","dtype":"F16","shape":[2],"data_offsets":[0,8]}})", data);
  expect_error([&] { SafetensorsFile f(dup_key); }, dup_key, "duplicate key \"dtype\"");

  const std::string meta_num = header_file("meta_num", R"({"__metadata__":{"step":3}})");
  expect_error([&] { SafetensorsFile f(meta_num); }, meta_num, "not a string");
  const std::string meta_arr = header_file("meta_arr", R"({"__metadata__":["x"]})");
  expect_error([&] { SafetensorsFile f(meta_arr); }, meta_arr, "not an object");
}

TEST_F(SafetensorsTest, ErrorsReadingUnsupportedDtypeOrUnknownName) {
  const std::string p = header_file("ids",
      R"({"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},)"
      R"("d":{"dtype":"F64","shape":[1],"data_offsets":[16,24]}})", std::string(24, '\0'));
  SafetensorsFile f(p);  // listing them is fine
  EXPECT_EQ(f.bytes("ids").size(), 16u);
  float dst[2];
  bf16 dst16[2];
  expect_error([&] { f.read_f32("ids", dst); }, p, "dtype I64");
  expect_error([&] { f.read_bf16("d", dst16); }, p, "dtype F64");
  expect_error([&] { f.read_rows_f32("ids", 0, 1, dst); }, p, "cannot be read");
  expect_error([&] { f.info("nope\n"); }, p, "no tensor named \"nope\\n\"");
}

TEST_F(SafetensorsTest, ErrorsWriterRejectsBadTensors) {
  const float v[2] = {1, 2};
  expect_error([&] { write_safetensors(path("w1"), {{"a", "F32", {2}, v, 8}, {"a", "F32", {2}, v, 8}}); },
               path("w1"), "duplicate");
  expect_error([&] { write_safetensors(path("w2"), {{"a", "Q8", {2}, v, 8}}); }, path("w2"),
               "unknown dtype");
  expect_error([&] { write_safetensors(path("w3"), {{"__metadata__", "F32", {2}, v, 8}}); }, path("w3"),
               "reserved");
  EXPECT_FALSE(fs::exists(path("w1")));
}

TEST_F(SafetensorsTest, ErrorsCheckpointIndexAndShards) {
  const float v[4] = {1, 2, 3, 4};
  const std::vector<TensorOut> out = {{"a", "F32", {2}, v, 8}, {"b", "F32", {2}, v + 2, 8}};
  const std::string ckpt = path("ckpt");
  write_sharded_safetensors(ckpt, out, 8);  // a -> shard 1, b -> shard 2
  const std::string index = ckpt + "/model.safetensors.index.json";
  const std::string shard2 = "model-00002-of-00002.safetensors";

  // Missing shard: named.
  fs::rename(ckpt + "/" + shard2, path("aside"));
  expect_error([&] { SafetensorsCheckpoint c(ckpt); }, index, shard2);
  expect_error([&] { SafetensorsCheckpoint c(ckpt); }, index, "not found");
  fs::rename(path("aside"), ckpt + "/" + shard2);
  SafetensorsCheckpoint ok(ckpt);

  auto write_index = [&](const std::string& text) { std::ofstream(index, std::ios::binary) << text; };
  write_index("{\"weight_map\": ");
  expect_error([&] { SafetensorsCheckpoint c(ckpt); }, index, "malformed index");
  write_index(R"({"metadata": {}})");
  expect_error([&] { SafetensorsCheckpoint c(ckpt); }, index, "weight_map");
  write_index(R"({"weight_map": {"a": 1}})");
  expect_error([&] { SafetensorsCheckpoint c(ckpt); }, index, "not a string");
  write_index(R"({"weight_map": {"a": "../x.safetensors"}})");
  expect_error([&] { SafetensorsCheckpoint c(ckpt); }, index, "plain file name");

  // Mapped to the wrong shard: "b" is not in shard 1.
  write_index(R"({"weight_map": {"a": "model-00001-of-00002.safetensors",
                                  "b": "model-00001-of-00002.safetensors"}})");
  expect_error([&] { SafetensorsCheckpoint c(ckpt); }, index, "no such tensor");
  // A shard holds a tensor the map does not list.
  write_index(R"({"weight_map": {"a": "model-00001-of-00002.safetensors",
                                  "c": "model-00002-of-00002.safetensors"}})");
  expect_error([&] { SafetensorsCheckpoint c(ckpt); }, index, "not listed");

  // The same tensor in two shards.
  write_safetensors(ckpt + "/" + shard2, {{"a", "F32", {2}, v, 8}, {"b", "F32", {2}, v + 2, 8}});
  write_index(R"({"weight_map": {"a": "model-00001-of-00002.safetensors",
                                  "b": "model-00002-of-00002.safetensors"}})");
  expect_error([&] { SafetensorsCheckpoint c(ckpt); }, index, "present in two shards");

  fs::create_directories(path("nothing"));
  expect_error([&] { SafetensorsCheckpoint c(path("nothing")); }, path("nothing"), "no model.safetensors");
}

}  // namespace
}  // namespace mt
