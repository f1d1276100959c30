// Boxes of tensors: copy_box and intersect against naive references, reading a box from an HF
// checkpoint (every dtype, single and sharded) against slicing the full read, and box shard sets
// written under one split and read back under others, with replicas, holes and bad metadata.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "core/error.h"
#include "core/f16.h"
#include "data_fixtures.h"
#include "io/box_read.h"
#include "io/box_shards.h"
#include "io/safetensors_index.h"
#include "io/safetensors_write.h"
#include "core/tensor_box.h"
#include "temp_dirs.h"

namespace mt {
namespace {

namespace fs = std::filesystem;

using testdata::error_of;

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

TensorBox box(std::vector<int64_t> begin, std::vector<int64_t> end) {
  return TensorBox{std::move(begin), std::move(end)};
}

// Distinct, exactly representable in float, bf16 and f16 (small integers and halves).
float value_at(int64_t flat) { return float(flat % 200) * 0.5f - 37.0f; }

std::vector<float> iota_values(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = value_at(i);
  return v;
}

// Full-tensor row-major offset of a multi-index.
int64_t flat_index(const std::vector<int64_t>& shape, const std::vector<int64_t>& idx) {
  int64_t f = 0;
  for (size_t d = 0; d < shape.size(); ++d) f = f * shape[d] + idx[d];
  return f;
}

// Every multi-index of `b`, row-major.
std::vector<std::vector<int64_t>> indices_of(const TensorBox& b) {
  std::vector<std::vector<int64_t>> out;
  if (b.empty()) return out;
  std::vector<int64_t> idx = b.begin;
  for (;;) {
    out.push_back(idx);
    size_t d = b.rank();
    while (d > 0 && ++idx[d - 1] == b.end[d - 1]) {
      idx[d - 1] = b.begin[d - 1];
      --d;
    }
    if (d == 0) return out;
  }
}

// The elements of box `b` of a full row-major tensor, the naive way.
std::vector<float> slice(const std::vector<float>& full, const std::vector<int64_t>& shape, const TensorBox& b) {
  std::vector<float> out;
  for (const auto& idx : indices_of(b)) out.push_back(full[size_t(flat_index(shape, idx))]);
  return out;
}

// A random box within `shape` (possibly empty in some dimension when allow_empty).
TensorBox random_box(std::mt19937& rng, const std::vector<int64_t>& shape, bool allow_empty) {
  TensorBox b;
  for (int64_t n : shape) {
    std::uniform_int_distribution<int64_t> pick(0, n);
    int64_t lo = pick(rng), hi = pick(rng);
    if (lo > hi) std::swap(lo, hi);
    if (!allow_empty && lo == hi) (hi < n) ? ++hi : --lo;
    b.begin.push_back(lo);
    b.end.push_back(hi);
  }
  return b;
}

// A fresh directory per test.
class BoxFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* t = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = testing::fresh_temp_dir("box_" + std::string(t->test_suite_name()) + "_" + t->name());
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

// ---- TensorBox, intersect, copy_box ----

TEST(BoxTensorBox, WholeShapeNumelStrContains) {
  const TensorBox w = TensorBox::whole({12, 8});
  EXPECT_EQ(w, box({0, 0}, {12, 8}));
  EXPECT_EQ(w.rank(), 2u);
  EXPECT_EQ(w.numel(), 96);
  EXPECT_EQ(w.str(), "[0:12, 0:8]");
  const TensorBox b = box({0, 16}, {8, 32});
  EXPECT_EQ(b.str(), "[0:8, 16:32]");
  EXPECT_EQ(b.shape(), (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(b.numel(), 128);
  EXPECT_FALSE(b.empty());
  EXPECT_TRUE(box({3, 0}, {3, 5}).empty());
  EXPECT_TRUE(w.contains(box({2, 3}, {12, 8})));
  EXPECT_TRUE(w.contains(box({12, 8}, {12, 8})));   // empty, at the edge
  EXPECT_FALSE(w.contains(box({2, 3}, {13, 8})));   // past the end
  EXPECT_FALSE(w.contains(box({-1, 0}, {2, 2})));   // before the start
  EXPECT_FALSE(w.contains(box({5, 0}, {4, 2})));    // begin > end
  EXPECT_FALSE(w.contains(box({0}, {4})));          // rank mismatch
  EXPECT_EQ(TensorBox::whole({}).numel(), 1);       // a scalar
}

TEST(BoxIntersect, OverlapDisjointAndTouching) {
  EXPECT_EQ(intersect(box({0, 0}, {6, 4}), box({3, 2}, {12, 8})), box({3, 2}, {6, 4}));
  EXPECT_EQ(intersect(box({3, 2}, {12, 8}), box({0, 0}, {6, 4})), box({3, 2}, {6, 4}));
  EXPECT_EQ(intersect(box({2, 2}, {5, 5}), box({0, 0}, {12, 8})), box({2, 2}, {5, 5}));  // inside
  // Touching boxes share no element.
  EXPECT_TRUE(intersect(box({0, 0}, {6, 4}), box({6, 0}, {12, 4})).empty());
  // Disjoint in one dimension only: still empty, and never a negative extent.
  const TensorBox d = intersect(box({0, 0}, {6, 4}), box({2, 5}, {4, 8}));
  EXPECT_TRUE(d.empty());
  for (int64_t s : d.shape()) EXPECT_GE(s, 0);
  EXPECT_EQ(intersect(box({1}, {4}), box({7}, {9})).numel(), 0);
  EXPECT_NE(error_of([] { intersect(box({0}, {4}), box({0, 0}, {4, 4})); }).find("rank"), std::string::npos);

  // Against a per-element membership test.
  std::mt19937 rng(7);
  const std::vector<int64_t> shape{7, 5};
  for (int i = 0; i < 200; ++i) {
    const TensorBox a = random_box(rng, shape, true), b = random_box(rng, shape, true);
    const TensorBox c = intersect(a, b);
    for (const auto& idx : indices_of(TensorBox::whole(shape))) {
      const TensorBox one = box(idx, {idx[0] + 1, idx[1] + 1});
      EXPECT_EQ(c.contains(one), a.contains(one) && b.contains(one)) << a.str() << " " << b.str();
    }
  }
}

// copy_box between two random boxes over a random region, against an element-by-element copy;
// dst elements outside the region must keep their sentinel.
void check_copy_box(const std::vector<int64_t>& shape, unsigned seed) {
  std::mt19937 rng(seed);
  const std::vector<float> full = iota_values(TensorBox::whole(shape).numel());
  for (int trial = 0; trial < 300; ++trial) {
    const TensorBox sb = random_box(rng, shape, false), db = random_box(rng, shape, false);
    // Mostly the whole overlap; sometimes a sub-box of it.
    TensorBox region = intersect(sb, db);
    if (trial % 3 == 0 && !region.empty()) region = intersect(region, random_box(rng, shape, true));
    const std::vector<float> src = slice(full, shape, sb);
    std::vector<float> dst(size_t(db.numel()), 999.f), want = dst;
    for (const auto& idx : indices_of(region)) {
      std::vector<int64_t> in_d(idx.size());
      for (size_t k = 0; k < idx.size(); ++k) in_d[k] = idx[k] - db.begin[k];
      want[size_t(flat_index(db.shape(), in_d))] = full[size_t(flat_index(shape, idx))];
    }
    copy_box(src.data(), sb, dst.data(), db, region);
    ASSERT_EQ(dst, want) << "src " << sb.str() << " dst " << db.str() << " region " << region.str();
  }
}

TEST(BoxCopy, OneDMatchesReference) { check_copy_box({17}, 1); }
TEST(BoxCopy, TwoDMatchesReference) { check_copy_box({9, 7}, 2); }
TEST(BoxCopy, ThreeDMatchesReference) { check_copy_box({5, 4, 6}, 3); }

TEST(BoxCopy, FullRowsAndBf16) {
  // Equal-width boxes: the rows fold into one run; the result must still be exact.
  const std::vector<int64_t> shape{6, 4};
  const std::vector<float> full = iota_values(24);
  const TensorBox sb = box({1, 0}, {5, 4}), db = box({2, 0}, {6, 4}), region = box({2, 0}, {5, 4});
  const std::vector<float> src = slice(full, shape, sb);
  std::vector<bf16> src16(src.size()), dst16(size_t(db.numel()), float_to_bf16(-1.f));
  for (size_t i = 0; i < src.size(); ++i) src16[i] = float_to_bf16(src[i]);
  copy_box(src16.data(), sb, dst16.data(), db, region);
  const std::vector<float> want = slice(full, shape, region);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(to_float(dst16[i]), want[i]) << i;
  EXPECT_EQ(to_float(dst16.back()), -1.f);  // row 5 is outside the region
}

TEST(BoxCopy, RegionOutsideABoxFails) {
  std::vector<float> a(16), b(16);
  const std::string e = error_of([&] {
    copy_box(a.data(), box({0, 0}, {4, 4}), b.data(), box({2, 2}, {6, 6}), box({1, 1}, {4, 4}));
  });
  EXPECT_TRUE(starts_with(e, "copy_box: region [1:4, 1:4] is not inside the destination box [2:6, 2:6]")) << e;
  EXPECT_NE(error_of([&] {
              copy_box(a.data(), box({0, 0}, {4, 4}), b.data(), box({0, 0}, {4, 4}), box({3, 0}, {1, 4}));
            }).find("is not inside the source box"),
            std::string::npos);  // begin > end is not an empty region
  EXPECT_NE(error_of([&] { copy_box(a.data(), box({0, 0}, {4, 4}), b.data(), box({0, 0}, {4, 4}), box({0}, {4})); })
                .find("is not inside"),
            std::string::npos);  // rank mismatch
  // The empty intersection of boxes that do not meet is accepted and copies nothing.
  const TensorBox sb = box({0, 0}, {2, 8}), db = box({6, 0}, {8, 8});
  b.assign(16, 5.f);
  copy_box(a.data(), sb, b.data(), db, intersect(sb, db));
  EXPECT_EQ(b, std::vector<float>(16, 5.f));
}

// ---- read_box from HF checkpoints ----

class BoxRead : public BoxFiles {};

TEST_F(BoxRead, EveryBoxEveryDtype) {
  const std::vector<int64_t> mshape{6, 5}, vshape{9};
  const std::vector<float> m = iota_values(30), v = iota_values(9);
  std::vector<bf16> m16(30), v16(9);
  std::vector<uint16_t> mh(30), vh(9);
  for (size_t i = 0; i < 30; ++i) m16[i] = float_to_bf16(m[i]), mh[i] = float_to_f16(m[i]);
  for (size_t i = 0; i < 9; ++i) v16[i] = float_to_bf16(v[i]), vh[i] = float_to_f16(v[i]);
  write_safetensors(path("f32.safetensors"), {{"m", "F32", mshape, m.data(), 120}, {"v", "F32", vshape, v.data(), 36}});
  write_safetensors(path("bf16.safetensors"),
                    {{"m", "BF16", mshape, m16.data(), 60}, {"v", "BF16", vshape, v16.data(), 18}});
  write_safetensors(path("f16.safetensors"),
                    {{"m", "F16", mshape, mh.data(), 60}, {"v", "F16", vshape, vh.data(), 18}});

  for (const char* file : {"f32.safetensors", "bf16.safetensors", "f16.safetensors"}) {
    SCOPED_TRACE(file);
    const SafetensorsCheckpoint ckpt(path(file));
    for (const auto& [name, shape] : {std::pair{"m", mshape}, std::pair{"v", vshape}}) {
      std::vector<float> full(size_t(TensorBox::whole(shape).numel()));
      std::vector<bf16> full16(full.size());
      ckpt.read_f32(name, full.data());
      ckpt.read_bf16(name, full16.data());
      ASSERT_EQ(full, (std::string(name) == "m" ? m : v));  // the values are exact in every dtype
      // Every box of the tensor, empty ones included.
      std::vector<TensorBox> boxes;
      if (shape.size() == 1) {
        for (int64_t b = 0; b <= shape[0]; ++b)
          for (int64_t e = b; e <= shape[0]; ++e) boxes.push_back(box({b}, {e}));
      } else {
        for (int64_t r0 = 0; r0 <= shape[0]; ++r0)
          for (int64_t r1 = r0; r1 <= shape[0]; ++r1)
            for (int64_t c0 = 0; c0 <= shape[1]; ++c0)
              for (int64_t c1 = c0; c1 <= shape[1]; ++c1) boxes.push_back(box({r0, c0}, {r1, c1}));
      }
      for (const TensorBox& b : boxes) {
        const std::vector<float> want = slice(full, shape, b);
        std::vector<float> got(want.size() + 1, 555.f);  // one guard element past the end
        read_box_f32(ckpt, name, b, got.data());
        ASSERT_EQ(got.back(), 555.f) << b.str();
        got.pop_back();
        ASSERT_EQ(got, want) << name << " " << b.str();
        std::vector<bf16> got16(want.size());
        read_box_bf16(ckpt, name, b, got16.data());
        for (const auto& idx : indices_of(b)) {
          std::vector<int64_t> in_b(idx.size());
          for (size_t k = 0; k < idx.size(); ++k) in_b[k] = idx[k] - b.begin[k];
          ASSERT_EQ(got16[size_t(flat_index(b.shape(), in_b))].bits, full16[size_t(flat_index(shape, idx))].bits);
        }
      }
    }
  }
}

TEST_F(BoxRead, RoundsF32ToBf16LikeTheFullRead) {
  // Values that bf16 cannot hold: the box read must round exactly as read_bf16 does.
  std::vector<float> m(4 * 6);
  for (size_t i = 0; i < m.size(); ++i) m[i] = 1.0f + float(i) * 0.0013f;
  write_safetensors(path("m.safetensors"), {{"m", "F32", {4, 6}, m.data(), m.size() * 4}});
  const SafetensorsCheckpoint ckpt(path("m.safetensors"));
  std::vector<bf16> full(m.size()), got(6);
  ckpt.read_bf16("m", full.data());
  read_box_bf16(ckpt, "m", box({1, 2}, {3, 5}), got.data());
  const int64_t rows[] = {1, 1, 1, 2, 2, 2}, cols[] = {2, 3, 4, 2, 3, 4};
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(got[i].bits, full[size_t(rows[i] * 6 + cols[i])].bits) << i;
}

TEST_F(BoxRead, ShardedCheckpoint) {
  const std::vector<float> a = iota_values(8 * 6), b = iota_values(10), c = iota_values(3 * 7);
  std::vector<float> c2(c);
  for (float& x : c2) x += 100.f;
  const std::string dir = path("model");
  fs::create_directories(dir);
  // 200-byte shards: "a" (192 bytes) alone, then "b" + "c" split apart.
  write_sharded_safetensors(dir,
                            {{"a", "F32", {8, 6}, a.data(), 192},
                             {"b", "F32", {10}, b.data(), 40},
                             {"c", "F32", {3, 7}, c2.data(), 84}},
                            200);
  const SafetensorsCheckpoint ckpt(dir);
  ASSERT_GT(ckpt.shard_paths().size(), 1u);
  std::vector<float> got(12);
  read_box_f32(ckpt, "a", box({2, 3}, {6, 6}), got.data());
  EXPECT_EQ(got, slice(a, {8, 6}, box({2, 3}, {6, 6})));
  got.assign(4, 0.f);
  read_box_f32(ckpt, "b", box({5}, {9}), got.data());
  EXPECT_EQ(got, slice(b, {10}, box({5}, {9})));
  got.assign(3, 0.f);
  read_box_f32(ckpt, "c", box({0, 6}, {3, 7}), got.data());  // one column
  EXPECT_EQ(got, slice(c2, {3, 7}, box({0, 6}, {3, 7})));
}

TEST_F(BoxRead, Errors) {
  const std::vector<float> m = iota_values(12);
  const std::vector<int32_t> ids{1, 2, 3};
  write_safetensors(path("m.safetensors"), {{"m", "F32", {3, 4}, m.data(), 48},
                                            {"cube", "F32", {1, 2, 6}, m.data(), 48},
                                            {"ids", "I32", {3}, ids.data(), 12}});
  const std::string file = path("m.safetensors");
  const SafetensorsCheckpoint ckpt(file);
  std::vector<float> dst(64);
  auto err = [&](const std::string& name, const TensorBox& b) {
    const std::string e = error_of([&] { read_box_f32(ckpt, name, b, dst.data()); });
    EXPECT_TRUE(starts_with(e, file + ": ")) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    return e;
  };
  EXPECT_EQ(err("m", box({0, 2}, {3, 5})), file + ": tensor \"m\": box [0:3, 2:5] is out of bounds for shape [3, 4]");
  EXPECT_NE(err("m", box({-1, 0}, {1, 4})).find("out of bounds"), std::string::npos);
  EXPECT_NE(err("m", box({2, 0}, {1, 4})).find("out of bounds"), std::string::npos);  // begin > end
  EXPECT_EQ(err("m", box({0}, {3})), file + ": tensor \"m\" has rank 2 but box [0:3] has rank 1");
  EXPECT_NE(err("cube", box({0, 0, 0}, {1, 1, 1})).find("1-D and 2-D tensors only"), std::string::npos);
  EXPECT_NE(err("ids", box({0}, {3})).find("has dtype I32"), std::string::npos);
  EXPECT_NE(err("nope", box({0}, {1})).find("no tensor named \"nope\""), std::string::npos);
}

// ---- box shard sets ----

// The reference tensors: W [12, 8] and v [10].
const std::vector<int64_t> kW{12, 8}, kV{10};
const std::vector<float> kWData = iota_values(96);
std::vector<float> v_data() {
  std::vector<float> v(10);
  for (size_t i = 0; i < 10; ++i) v[i] = 1000.f + float(i);
  return v;
}

// One piece: the elements of `b` of `full`, kept alive with the BoxShardOut that points at them.
struct Piece {
  std::string name;
  std::vector<int64_t> shape;
  TensorBox b;
  std::vector<float> data;
};

void write_pieces(const std::string& path, const std::vector<Piece>& pieces) {
  std::vector<BoxShardOut> outs;
  for (const auto& p : pieces) outs.push_back({p.name, p.shape, p.b, p.data.data()});
  write_box_shard(path, outs);
}

Piece w_piece(const TensorBox& b) { return {"W", kW, b, slice(kWData, kW, b)}; }
Piece v_piece(const TensorBox& b) { return {"v", kV, b, slice(v_data(), kV, b)}; }

std::vector<float> read(const BoxShardSet& set, const std::string& name, const TensorBox& b) {
  std::vector<float> out(size_t(b.numel()) + 1, -777.f);
  set.read_box_f32(name, b, out.data());
  EXPECT_EQ(out.back(), -777.f) << "wrote past the box " << b.str();
  out.pop_back();
  return out;
}

class BoxShards : public BoxFiles {
 protected:
  // W as a 2x2 grid whose row blocks overlap (rows 5 and 6 are in two files each, as replicas
  // would be); v split into two overlapping halves, each half in two files.
  std::vector<std::string> write_grid() {
    const int64_t r[2][2] = {{0, 7}, {5, 12}}, c[2][2] = {{0, 4}, {4, 8}};
    const int64_t vb[2][2] = {{0, 6}, {4, 10}};
    std::vector<std::string> paths;
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) {
        paths.push_back(path("rank" + std::to_string(2 * i + j) + ".safetensors"));
        write_pieces(paths.back(), {w_piece(box({r[i][0], c[j][0]}, {r[i][1], c[j][1]})),
                                    v_piece(box({vb[j][0]}, {vb[j][1]}))});
      }
    return paths;
  }
};

TEST_F(BoxShards, ReadBackUnderOtherSplits) {
  const BoxShardSet set(write_grid());
  EXPECT_EQ(set.names(), (std::vector<std::string>{"W", "v"}));
  EXPECT_TRUE(set.contains("W"));
  EXPECT_FALSE(set.contains("w"));
  EXPECT_EQ(set.full_shape("W"), kW);
  EXPECT_EQ(set.full_shape("v"), kV);

  // The whole tensors.
  EXPECT_EQ(read(set, "W", TensorBox::whole(kW)), kWData);
  EXPECT_EQ(read(set, "v", TensorBox::whole(kV)), v_data());
  // Rows of 3 (each crossing the grid's column split; rows 3:6 and 6:9 cross the row overlap).
  for (int64_t r = 0; r < 12; r += 3) {
    const TensorBox b = box({r, 0}, {r + 3, 8});
    EXPECT_EQ(read(set, "W", b), slice(kWData, kW, b)) << b.str();
  }
  // Columns of 4 and of 3 (the latter crossing the column split).
  for (int64_t c0 : {0, 4}) {
    const TensorBox b = box({0, c0}, {12, c0 + 4});
    EXPECT_EQ(read(set, "W", b), slice(kWData, kW, b)) << b.str();
  }
  for (int64_t c0 = 0; c0 + 3 <= 8; c0 += 1) {
    const TensorBox b = box({2, c0}, {11, c0 + 3});
    EXPECT_EQ(read(set, "W", b), slice(kWData, kW, b)) << b.str();
  }
  // Every single element, and every 1-element / 3-element piece of v.
  for (const auto& idx : indices_of(TensorBox::whole(kW))) {
    const TensorBox b = box(idx, {idx[0] + 1, idx[1] + 1});
    ASSERT_EQ(read(set, "W", b), std::vector<float>{kWData[size_t(idx[0] * 8 + idx[1])]}) << b.str();
  }
  for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(read(set, "v", box({i}, {i + 1})), std::vector<float>{1000.f + float(i)});
  for (int64_t i = 0; i + 3 <= 10; ++i)
    EXPECT_EQ(read(set, "v", box({i}, {i + 3})), slice(v_data(), kV, box({i}, {i + 3})));
  // An empty box reads nothing and is not an error.
  EXPECT_TRUE(read(set, "W", box({4, 4}, {4, 8})).empty());
}

TEST_F(BoxShards, FilesInAnyOrderAndRandomBoxes) {
  std::vector<std::string> paths = write_grid();
  std::reverse(paths.begin(), paths.end());
  const BoxShardSet set(paths);
  std::mt19937 rng(11);
  for (int i = 0; i < 300; ++i) {
    const TensorBox b = random_box(rng, kW, true);
    ASSERT_EQ(read(set, "W", b), slice(kWData, kW, b)) << b.str();
  }
}

TEST_F(BoxShards, MissingCoverageIsExact) {
  const std::vector<std::string> grid = write_grid();
  {
    // Without rank 3 (rows 7:12, cols 4:8 are then in no file).
    const BoxShardSet set({grid[0], grid[1], grid[2]});
    const std::string e = error_of([&] { read(set, "W", TensorBox::whole(kW)); });
    EXPECT_NE(e.find("\"W\": box [0:12, 0:8] is not covered by the shards (element [7, 4] is in none of the 3 pieces"),
              std::string::npos) << e;
    EXPECT_TRUE(starts_with(e, grid[0])) << e;
    // What the three files do cover still reads.
    EXPECT_EQ(read(set, "W", box({0, 0}, {12, 4})), slice(kWData, kW, box({0, 0}, {12, 4})));
    EXPECT_EQ(read(set, "W", box({0, 0}, {7, 8})), slice(kWData, kW, box({0, 0}, {7, 8})));
    EXPECT_NE(error_of([&] { read(set, "W", box({6, 3}, {8, 5})); }).find("element [7, 4]"), std::string::npos);
  }
  // Every piece meets the box, yet the box has holes: "some piece intersects" is not enough.
  write_pieces(path("diag0.safetensors"), {w_piece(box({0, 0}, {6, 4}))});
  write_pieces(path("diag1.safetensors"), {w_piece(box({6, 4}, {12, 8}))});
  const BoxShardSet diag({path("diag0.safetensors"), path("diag1.safetensors")});
  EXPECT_NE(error_of([&] { read(diag, "W", box({4, 2}, {8, 6})); }).find("element [4, 4] is in none"),
            std::string::npos);
  // Overlapping pieces whose sizes add up to more than the box, yet miss its end: counting
  // intersected elements without handling the overlap would call this covered.
  write_pieces(path("v0.safetensors"), {v_piece(box({0}, {6}))});
  write_pieces(path("v1.safetensors"), {v_piece(box({2}, {6}))});
  write_pieces(path("v2.safetensors"), {v_piece(box({1}, {5}))});
  const BoxShardSet vset({path("v0.safetensors"), path("v1.safetensors"), path("v2.safetensors")});
  const std::string e = error_of([&] { read(vset, "v", box({0}, {8})); });
  EXPECT_NE(e.find("\"v\": box [0:8] is not covered by the shards (element [6]"), std::string::npos) << e;
  EXPECT_EQ(read(vset, "v", box({0}, {6})), slice(v_data(), kV, box({0}, {6})));
}

TEST_F(BoxShards, NonFiniteValuesAreRefusedWhenRequiredNamingFileTensorAndElement) {
  // W's rows 0:6 in a clean file, rows 6:12 in one with a NaN at [9, 5] and v with +inf at [3].
  Piece bad_w = w_piece(box({6, 0}, {12, 8}));
  bad_w.data[size_t((9 - 6) * 8 + 5)] = std::numeric_limits<float>::quiet_NaN();
  Piece bad_v = v_piece(box({0}, {10}));
  bad_v.data[3] = std::numeric_limits<float>::infinity();
  write_pieces(path("clean.safetensors"), {w_piece(box({0, 0}, {6, 8}))});
  write_pieces(path("nan.safetensors"), {bad_w, bad_v});
  const BoxShardSet set({path("clean.safetensors"), path("nan.safetensors")});
  std::vector<float> dst(96);
  constexpr auto required = BoxShardSet::Finite::required;
  EXPECT_EQ(error_of([&] { set.read_box_f32("W", TensorBox::whole(kW), dst.data(), required); }),
            path("nan.safetensors") + ": tensor \"W\" holds NaN at element [9, 5]; the file is corrupt");
  EXPECT_EQ(error_of([&] { set.read_box_f32("v", box({2}, {5}), dst.data(), required); }),
            path("nan.safetensors") + ": tensor \"v\" holds an infinity at element [3]; the file is corrupt");
  // Boxes that miss the bad elements read, and without the requirement the values pass through.
  set.read_box_f32("W", box({0, 0}, {9, 8}), dst.data(), required);
  set.read_box_f32("v", box({4}, {10}), dst.data(), required);
  set.read_box_f32("W", TensorBox::whole(kW), dst.data());
  EXPECT_TRUE(std::isnan(dst[9 * 8 + 5]));
}

TEST_F(BoxShards, BadRequests) {
  const std::vector<std::string> grid = write_grid();
  const BoxShardSet set(grid);
  std::vector<float> dst(200);
  const std::string oob = error_of([&] { set.read_box_f32("W", box({0, 0}, {13, 8}), dst.data()); });
  EXPECT_EQ(oob, grid[0] + " (and 3 more box shard files): \"W\": box [0:13, 0:8] is out of bounds for shape [12, 8]");
  EXPECT_NE(error_of([&] { set.read_box_f32("W", box({0}, {8}), dst.data()); }).find("out of bounds"),
            std::string::npos);  // rank mismatch
  EXPECT_NE(error_of([&] { set.read_box_f32("x", box({0}, {1}), dst.data()); }).find("no tensor named \"x\""),
            std::string::npos);
  EXPECT_NE(error_of([&] { set.full_shape("x"); }).find("no tensor named \"x\""), std::string::npos);
  EXPECT_NE(error_of([] { BoxShardSet none({}); }).find("no files"), std::string::npos);
}

TEST_F(BoxShards, WriteRejectsBadBoxes) {
  const std::vector<float> d(100);
  const std::string p = path("bad.safetensors");
  EXPECT_EQ(error_of([&] { write_box_shard(p, {{"W", kW, box({0, 0}, {13, 8}), d.data()}}); }),
            p + ": tensor \"W\": box [0:13, 0:8] is not within the full shape [12, 8]");
  EXPECT_NE(error_of([&] { write_box_shard(p, {{"W", kW, box({0}, {8}), d.data()}}); }).find("not within"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              write_box_shard(p, {{"W", kW, box({0, 0}, {1, 8}), d.data()}, {"W", kW, box({1, 0}, {2, 8}), d.data()}});
            }).find("given twice"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(p));
}

TEST_F(BoxShards, WrittenFileIsPlainSafetensorsWithBoxMetadata) {
  const std::string p = path("one.safetensors");
  write_pieces(p, {w_piece(box({3, 2}, {5, 6})), v_piece(box({7}, {10}))});
  const SafetensorsFile f(p);
  EXPECT_EQ(f.info("W").shape, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(f.info("W").dtype, FileDtype::F32);
  EXPECT_EQ(f.metadata().at("meshtrain.boxes"),
            R"({"W":{"box":[[3,5],[2,6]],"shape":[12,8]},"v":{"box":[[7,10]],"shape":[10]}})");
  std::vector<float> w(8);
  f.read_f32("W", w.data());
  EXPECT_EQ(w, slice(kWData, kW, box({3, 2}, {5, 6})));
}

// Writes a safetensors file holding W's box [0:2, 0:8] (16 floats) with the given metadata.
std::string write_raw(const std::string& p, const std::map<std::string, std::string>& meta,
                      std::vector<int64_t> stored_shape = {2, 8}) {
  static const std::vector<float> data = iota_values(16);
  write_safetensors(p, {{"W", "F32", stored_shape, data.data(), 64}}, meta);
  return p;
}

TEST_F(BoxShards, CorruptedMetadata) {
  const std::string good = R"({"W": {"shape": [12, 8], "box": [[0, 2], [0, 8]]}})";
  auto err = [&](const std::map<std::string, std::string>& meta, std::vector<int64_t> stored = {2, 8}) {
    const std::string p = write_raw(path("bad.safetensors"), meta, stored);
    const std::string e = error_of([&] { BoxShardSet set({p}); });
    EXPECT_TRUE(starts_with(e, p + ": ")) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    return e;
  };
  auto has = [](const std::string& e, const std::string& part) {
    EXPECT_NE(e.find(part), std::string::npos) << e;
  };
  // The good one opens (the helper itself is sound).
  EXPECT_EQ(BoxShardSet({write_raw(path("good.safetensors"), {{"meshtrain.boxes", good}})}).full_shape("W"), kW);

  has(err({}), "no \"meshtrain.boxes\" in the metadata");
  has(err({{"other", "x"}}), "no \"meshtrain.boxes\" in the metadata");
  has(err({{"meshtrain.boxes", "{\"W\": "}}), "\"meshtrain.boxes\": not valid JSON");
  has(err({{"meshtrain.boxes", "[1, 2]"}}), "is not a JSON object");
  has(err({{"meshtrain.boxes", R"({"W": {"shape": [12, 8]}})"}}), "expected {\"shape\"");
  has(err({{"meshtrain.boxes", R"({"W": {"shape": [12, -8], "box": [[0, 2], [0, 8]]}})"}}), "non-negative integers");
  has(err({{"meshtrain.boxes", R"({"W": {"shape": [12, 8.5], "box": [[0, 2], [0, 8]]}})"}}), "non-negative integers");
  has(err({{"meshtrain.boxes", R"({"W": {"shape": [12, 8], "box": [[0, 2], [0]]}})"}}), "[begin, end] pairs");
  has(err({{"meshtrain.boxes", R"({"W": {"shape": [12, 8], "box": [[0, 2], ["0", 8]]}})"}}), "[begin, end] pairs");
  has(err({{"meshtrain.boxes", R"({"W": {"shape": [12, 8], "box": [[0, 2]]}})"}}), "has rank 1 but shape [12, 8]");
  has(err({{"meshtrain.boxes", R"({"W": {"shape": [12, 8], "box": [[11, 13], [0, 8]]}})"}}, {2, 8}),
      "box [11:13, 0:8] is outside the full shape [12, 8]");
  has(err({{"meshtrain.boxes", R"({"W": {"shape": [12, 8], "box": [[2, 0], [0, 8]]}})"}}), "is outside the full shape");
  has(err({{"meshtrain.boxes", R"({"W": {"shape": [4294967296, 4294967296], "box": [[0, 2], [0, 8]]}})"}}),
      "too many elements");
  // The stored tensor does not have its box's shape.
  EXPECT_EQ(err({{"meshtrain.boxes", good}}, {4, 4}),
            path("bad.safetensors") +
                ": tensor \"W\" is stored with shape [4, 4] but its box [0:2, 0:8] has shape [2, 8]");
  // Metadata and stored tensors disagree about the names.
  has(err({{"meshtrain.boxes", R"({"W": {"shape": [12, 8], "box": [[0, 2], [0, 8]]},
                                   "U": {"shape": [3], "box": [[0, 3]]}})"}}),
      "tensor \"U\" is listed in metadata \"meshtrain.boxes\" but not stored in the file");
  has(err({{"meshtrain.boxes", "{}"}}), "tensor \"W\" is stored but missing from metadata");
}

TEST_F(BoxShards, FullShapeDisagreesAcrossFiles) {
  const std::string a = write_raw(path("a.safetensors"),
                                  {{"meshtrain.boxes", R"({"W": {"shape": [12, 8], "box": [[0, 2], [0, 8]]}})"}});
  const std::string b = write_raw(path("b.safetensors"),
                                  {{"meshtrain.boxes", R"({"W": {"shape": [10, 8], "box": [[2, 4], [0, 8]]}})"}});
  EXPECT_EQ(error_of([&] { BoxShardSet set({a, b}); }),
            b + ": tensor \"W\" has full shape [10, 8] but [12, 8] in " + a);
}

}  // namespace
}  // namespace mt
