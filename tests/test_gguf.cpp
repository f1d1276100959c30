// GGUF export checked against the format as specified, with our own reader: header bytes,
// alignment, tensor names / dims / types, values (after undoing the q/k permutation), metadata,
// LoRA adapters, tokenizer metadata, and the reader's rejection of corrupt files.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <random>
#include <set>

#include "core/bf16.h"
#include "core/error.h"
#include "core/f16.h"
#include "data/ggml_vocab.h"
#include "data/tokenizer.h"
#include "io/gguf_export.h"
#include "io/gguf_reader.h"
#include "io/gguf_writer.h"
#include "io/llama2c.h"
#include "model_fixtures.h"
#include "temp_dirs.h"

namespace mt {
namespace {

std::string temp_path(const std::string& name) {
  static const std::string dir = mt::testing::fresh_temp_dir("gguf");
  return dir + "/" + name;
}

std::vector<char> file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

std::vector<float> values(const Param& p) {
  std::vector<float> v(size_t(p.numel));
  if (p.master) std::memcpy(v.data(), p.master, v.size() * 4);
  else convert(v.data(), p.compute, v.size());
  return v;
}

// HF name -> (GGUF name, rotary heads) for every base tensor of a config.
std::vector<std::pair<std::string, std::string>> expected_names(const ModelConfig& c) {
  std::vector<std::pair<std::string, std::string>> n = {{kEmbedName, "token_embd.weight"},
                                                        {kFinalNormName, "output_norm.weight"}};
  if (!c.tie_word_embeddings) n.push_back({kHeadName, "output.weight"});
  const char* pairs[][2] = {{"input_layernorm", "attn_norm"},        {"self_attn.q_proj", "attn_q"},
                            {"self_attn.k_proj", "attn_k"},          {"self_attn.v_proj", "attn_v"},
                            {"self_attn.o_proj", "attn_output"},     {"post_attention_layernorm", "ffn_norm"},
                            {"mlp.gate_proj", "ffn_gate"},           {"mlp.up_proj", "ffn_up"},
                            {"mlp.down_proj", "ffn_down"}};
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    for (auto& p : pairs)
      n.push_back({layer_prefix(l) + p[0] + ".weight", "blk." + std::to_string(l) + "." + p[1] + ".weight"});
  return n;
}

int64_t rot_heads(const std::string& hf, const ModelConfig& c) {
  if (hf.find("q_proj") != std::string::npos) return c.num_attention_heads;
  if (hf.find("k_proj") != std::string::npos) return c.num_key_value_heads;
  return 0;
}

// Exports a model and checks every tensor against it; stored(x) is what the dtype makes of x.
template <class Stored>
GgufFile export_and_check(Transformer& m, GgufDtype dtype, GgmlType mat_type, Stored stored) {
  const std::string path = temp_path("model.gguf");
  export_gguf_model(m, path, nullptr, dtype);
  GgufFile g = read_gguf(path);
  std::filesystem::remove(path);
  const ModelConfig& c = m.config();
  const auto names = expected_names(c);
  EXPECT_EQ(g.tensors.size(), names.size() + (c.rope_scaling.factor > 0 ? 1 : 0));  // + rope_freqs
  for (const auto& [hf, gg] : names) {
    SCOPED_TRACE(gg);
    const Param& p = m.base().get(hf);
    const GgufTensorInfo& t = g.tensor(gg);
    const bool norm = p.shape.size() == 1;
    EXPECT_EQ(t.type, norm ? GgmlType::f32 : mat_type);
    // ggml's ne is the row-major shape reversed: [rows, cols] -> [cols, rows].
    std::vector<uint64_t> ne(p.shape.rbegin(), p.shape.rend());
    EXPECT_EQ(t.ne, ne);
    std::vector<float> got = g.tensor_f32(gg);
    if (int64_t h = rot_heads(hf, c)) {  // undo the export's permutation with the importer's
      std::vector<float> hfrows(got.size());
      permute_rotary_rows(got.data(), hfrows.data(), h, c.head_dim(), p.shape[1]);
      got = hfrows;
    }
    std::vector<float> want = values(p);
    EXPECT_EQ(got.size(), want.size());
    for (size_t k = 0; k < want.size() && k < got.size(); ++k) {
      const float w = norm ? want[k] : stored(want[k]);
      if (got[k] != w) {  // (ASSERT cannot be used in a function returning a value)
        ADD_FAILURE() << "element " << k << ": " << got[k] << " != " << w;
        break;
      }
    }
  }
  return g;
}

// ----------------------------------------------------------------------------------------------

TEST(GgufF16, RoundsToNearestEven) {
  EXPECT_EQ(float_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(float_to_f16(-2.0f), 0xc000);
  EXPECT_EQ(float_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_f16(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_f16(65520.0f), 0x7c00);  // the tie goes to the even neighbour: infinity
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -24)), 0x0001);          // smallest subnormal
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -25)), 0x0000);          // tie with 0: even is 0
  EXPECT_EQ(float_to_f16(std::ldexp(3.0f, -25)), 0x0002);          // 1.5 units: tie to 2
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -14)), 0x0400);          // smallest normal
  EXPECT_EQ(float_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);   // tie: stays even
  EXPECT_EQ(float_to_f16(1.0f + std::ldexp(3.0f, -11)), 0x3c02);   // tie: rounds up to even
  EXPECT_EQ(float_to_f16(INFINITY), 0x7c00);
  EXPECT_TRUE(std::isnan(f16_to_float(float_to_f16(NAN))));
  // Every finite half survives the round trip through float.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue;
    ASSERT_EQ(float_to_f16(f16_to_float(uint16_t(h))), h) << h;
  }
#ifdef __FLT16_MANT_DIG__
  // And random floats round exactly as the compiler's _Float16 does.
  std::mt19937 gen(3);
  for (int k = 0; k < 200000; ++k) {
    uint32_t bits = gen();
    float f;
    std::memcpy(&f, &bits, 4);
    if (std::isnan(f)) continue;
    _Float16 ref = _Float16(f);
    uint16_t rb;
    std::memcpy(&rb, &ref, 2);
    ASSERT_EQ(float_to_f16(f), rb) << f;
  }
#endif
}

TEST(GgufWriter, HeaderBytesAndAlignment) {
  const std::string path = temp_path("hand.gguf");
  const float data[6] = {1, 2, 3, 4, 5, 6};
  write_gguf(path, {{"a", GgufValue::u32(7)}}, {{"t", {2, 3}, GgmlType::f32, data, {}}});
  const std::vector<char> b = file_bytes(path);
  std::filesystem::remove(path);
  const unsigned char want[] = {
      'G', 'G', 'U', 'F', 3, 0, 0, 0,         // magic, version 3
      1, 0, 0, 0, 0, 0, 0, 0,                 // tensor count
      2, 0, 0, 0, 0, 0, 0, 0,                 // kv count ("a" and general.alignment)
      1, 0, 0, 0, 0, 0, 0, 0, 'a',            // key "a"
      4, 0, 0, 0, 7, 0, 0, 0,                 // uint32 7
      17, 0, 0, 0, 0, 0, 0, 0,                // key "general.alignment"
      'g', 'e', 'n', 'e', 'r', 'a', 'l', '.', 'a', 'l', 'i', 'g', 'n', 'm', 'e', 'n', 't',
      4, 0, 0, 0, 32, 0, 0, 0,                // uint32 32
      1, 0, 0, 0, 0, 0, 0, 0, 't',            // tensor name "t"
      2, 0, 0, 0,                             // 2 dims
      3, 0, 0, 0, 0, 0, 0, 0,                 // ne[0] = 3 (columns, fastest)
      2, 0, 0, 0, 0, 0, 0, 0,                 // ne[1] = 2 (rows)
      0, 0, 0, 0,                             // F32
      0, 0, 0, 0, 0, 0, 0, 0,                 // offset 0
  };
  ASSERT_GE(b.size(), sizeof(want));
  for (size_t k = 0; k < sizeof(want); ++k) ASSERT_EQ((unsigned char)b[k], want[k]) << "byte " << k;
  const size_t data_at = (sizeof(want) + 31) / 32 * 32;
  for (size_t k = sizeof(want); k < data_at; ++k) EXPECT_EQ(b[k], 0) << "padding byte " << k;
  ASSERT_EQ(b.size(), data_at + 32);  // 24 data bytes padded to 32
  EXPECT_EQ(std::memcmp(b.data() + data_at, data, sizeof(data)), 0);
}

TEST(GgufWriter, RejectsDuplicatesAndBadShapes) {
  const std::string path = temp_path("bad.gguf");
  const float x = 0;
  EXPECT_THROW(write_gguf(path, {{"k", GgufValue::u32(1)}, {"k", GgufValue::u32(2)}}, {}), Error);
  EXPECT_THROW(write_gguf(path, {}, {{"t", {1}, GgmlType::f32, &x, {}}, {"t", {1}, GgmlType::f32, &x, {}}}), Error);
  EXPECT_THROW(write_gguf(path, {}, {{"t", {}, GgmlType::f32, &x, {}}}), Error);
  EXPECT_THROW(write_gguf(path, {}, {{"t", {1, 1, 1, 1, 1}, GgmlType::f32, &x, {}}}), Error);
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(GgufExport, PermutationIsTheInverseOfTheImporters) {
  const int64_t heads = 3, D = 8, cols = 5;
  std::vector<float> x(size_t(heads * D * cols)), a(x.size()), b(x.size());
  for (size_t k = 0; k < x.size(); ++k) x[k] = float(k);
  unpermute_rotary_rows(x.data(), a.data(), heads, D, cols);
  permute_rotary_rows(a.data(), b.data(), heads, D, cols);
  EXPECT_EQ(b, x);
  // HF row (head 1, half 1, i 2) = row 1*8 + 4 + 2 goes to interleaved row 1*8 + 2*2 + 1.
  EXPECT_EQ(a[size_t((8 + 5) * cols)], x[size_t((8 + 6) * cols)]);
}

TEST(GgufExport, ModelF32RoundTrip) {
  const ModelConfig c = testing::tiny_config();
  Transformer m(c, Precision::fp32, LoraConfig{});
  m.init_weights(11);
  GgufFile g = export_and_check(m, GgufDtype::f32, GgmlType::f32, [](float x) { return x; });
  EXPECT_EQ(g.version, 3u);
  EXPECT_EQ(g.get_str("general.architecture"), "llama");
  EXPECT_EQ(g.get_str("general.name"), "model");  // the file name without its extension
  EXPECT_EQ(g.get_u32("general.file_type"), 0u);
  EXPECT_EQ(g.get_u32("general.alignment"), 32u);
  EXPECT_EQ(g.get_u32("llama.context_length"), uint64_t(c.max_position_embeddings));
  EXPECT_EQ(g.get_u32("llama.embedding_length"), 16u);
  EXPECT_EQ(g.get_u32("llama.block_count"), 2u);
  EXPECT_EQ(g.get_u32("llama.feed_forward_length"), 24u);
  EXPECT_EQ(g.get_u32("llama.rope.dimension_count"), 4u);
  EXPECT_EQ(g.get_u32("llama.attention.head_count"), 4u);
  EXPECT_EQ(g.get_u32("llama.attention.head_count_kv"), 2u);
  EXPECT_EQ(g.get_u32("llama.vocab_size"), 32u);
  EXPECT_EQ(g.get_f32("llama.attention.layer_norm_rms_epsilon"), c.rms_norm_eps);
  EXPECT_EQ(g.get_f32("llama.rope.freq_base"), c.rope_theta);
  EXPECT_EQ(g.find_tensor("rope_freqs.weight"), nullptr);
  EXPECT_EQ(g.find("tokenizer.ggml.model"), nullptr);
  // Alignment of the data section, of every tensor, and of the file's end.
  EXPECT_EQ(g.data_offset % 32, 0u);
  for (const auto& t : g.tensors) EXPECT_EQ(t.offset % 32, 0u) << t.name;
  EXPECT_EQ(g.bytes.size() % 32, 0u);
}

TEST(GgufExport, ModelBf16AndF16) {
  const ModelConfig c = testing::tiny_config();
  Transformer m(c, Precision::fp32, LoraConfig{});
  m.init_weights(12);
  GgufFile b = export_and_check(m, GgufDtype::bf16, GgmlType::bf16,
                                [](float x) { return to_float(float_to_bf16(x)); });
  EXPECT_EQ(b.get_u32("general.file_type"), 32u);
  GgufFile h = export_and_check(m, GgufDtype::f16, GgmlType::f16,
                                [](float x) { return f16_to_float(float_to_f16(x)); });
  EXPECT_EQ(h.get_u32("general.file_type"), 1u);
}

TEST(GgufExport, TiedEmbeddingsOmitOutput) {
  Transformer m(testing::tiny_config(/*tied=*/true), Precision::fp32, LoraConfig{});
  m.init_weights(13);
  GgufFile g = export_and_check(m, GgufDtype::f32, GgmlType::f32, [](float x) { return x; });
  EXPECT_EQ(g.find_tensor("output.weight"), nullptr);
}

TEST(GgufExport, FrozenBf16BaseExportsItsComputeCopy) {
  LoraConfig lora;
  lora.enabled = true;
  Transformer m(testing::tiny_config(), Precision::bf16, lora);
  m.init_weights(14);
  ASSERT_EQ(m.base().get(proj_param_name(0, kQ) + ".weight").master, nullptr);
  export_and_check(m, GgufDtype::bf16, GgmlType::bf16, [](float x) { return to_float(float_to_bf16(x)); });
}

TEST(GgufExport, Llama3RopeFreqs) {
  ModelConfig c = testing::tiny_config();
  c.hidden_size = 128, c.num_attention_heads = 2, c.num_key_value_heads = 1;  // head_dim 64
  c.rope_theta = 500000.0f;
  c.rope_scaling = RopeScaling{8.0f, 1.0f, 4.0f, 8192};
  Transformer m(c, Precision::fp32, LoraConfig{});
  m.init_weights(15);
  GgufFile g = export_and_check(m, GgufDtype::f32, GgmlType::f32, [](float x) { return x; });
  const GgufTensorInfo& t = g.tensor("rope_freqs.weight");
  EXPECT_EQ(t.type, GgmlType::f32);
  ASSERT_EQ(t.ne, std::vector<uint64_t>{32});
  const std::vector<float> f = g.tensor_f32("rope_freqs.weight");
  // The factors as llama.cpp's converter derives them from the config (in double).
  const double low_wl = 8192.0 / 1.0, high_wl = 8192.0 / 4.0;
  int scaled = 0, kept = 0, blended = 0;
  for (int i = 0; i < 32; ++i) {
    const double freq = std::pow(500000.0, -2.0 * i / 64.0), wl = 2 * std::numbers::pi / freq;
    double want;
    if (wl < high_wl) want = 1.0, ++kept;
    else if (wl > low_wl) want = 8.0, ++scaled;
    else {
      const double smooth = (8192.0 / wl - 1.0) / (4.0 - 1.0);
      want = 1.0 / ((1 - smooth) / 8.0 + smooth);
      ++blended;
    }
    EXPECT_NEAR(f[size_t(i)], want, 1e-5 * want) << i;
  }
  EXPECT_GT(scaled, 0);  // the config exercises all three regions
  EXPECT_GT(kept, 0);
  EXPECT_GT(blended, 0);
  EXPECT_EQ(f[0], 1.0f);
}

TEST(GgufExport, LoraAdapter) {
  const ModelConfig c = testing::tiny_config();
  LoraConfig lora;
  lora.enabled = true, lora.rank = 2, lora.alpha = 4.0f, lora.targets = {"q", "v", "lm_head"};
  Transformer m(c, Precision::fp32, lora);
  m.init_weights(16);
  // Known values: element k of tensor j is j * 1000 + k (exact in f32).
  int j = 0;
  for (auto& p : m.adapters().params()) {
    for (int64_t k = 0; k < p.numel; ++k) p.master[k] = float(j * 1000 + k);
    ++j;
  }
  const std::string path = temp_path("lora.gguf");
  export_gguf_lora(m, path, "tiny-lora");
  GgufFile g = read_gguf(path);
  std::filesystem::remove(path);
  EXPECT_EQ(g.get_str("general.architecture"), "llama");
  EXPECT_EQ(g.get_str("general.type"), "adapter");
  EXPECT_EQ(g.get_str("adapter.type"), "lora");
  EXPECT_EQ(g.get_str("general.name"), "tiny-lora");
  EXPECT_EQ(g.get_f32("adapter.lora.alpha"), 4.0f);

  std::set<std::string> names;
  for (const auto& t : g.tensors) names.insert(t.name);
  const std::set<std::string> want = {
      "blk.0.attn_q.weight.lora_a", "blk.0.attn_q.weight.lora_b", "blk.0.attn_v.weight.lora_a",
      "blk.0.attn_v.weight.lora_b", "blk.1.attn_q.weight.lora_a", "blk.1.attn_q.weight.lora_b",
      "blk.1.attn_v.weight.lora_a", "blk.1.attn_v.weight.lora_b", "output.weight.lora_a",
      "output.weight.lora_b"};
  EXPECT_EQ(names, want);

  const uint64_t C = 16, r = 2, kv = 8, V = 32;
  auto check = [&](const std::string& gg, const std::string& hf, std::vector<uint64_t> ne, int64_t heads) {
    SCOPED_TRACE(gg);
    const GgufTensorInfo& t = g.tensor(gg);
    EXPECT_EQ(t.type, GgmlType::f32);
    EXPECT_EQ(t.ne, ne);
    const std::vector<float> got = g.tensor_f32(gg);
    const Param& p = m.adapters().get(hf);
    const int64_t rows = p.shape[0], cols = p.shape[1], D = c.head_dim();
    for (int64_t row = 0; row < rows; ++row) {
      // File row (head, i, s) holds model row (head, s, i) where q/k rows are permuted.
      int64_t src = row;
      if (heads) {
        const int64_t h = row / D, i = (row % D) / 2, s = row % 2;
        src = h * D + s * (D / 2) + i;
      }
      for (int64_t col = 0; col < cols; ++col)
        ASSERT_EQ(got[size_t(row * cols + col)], p.master[src * cols + col]) << row << "," << col;
    }
  };
  for (int l = 0; l < 2; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".", q = proj_param_name(l, kQ), v = proj_param_name(l, kV);
    check(b + "attn_q.weight.lora_a", q + ".lora_A.weight", {C, r}, 0);
    check(b + "attn_q.weight.lora_b", q + ".lora_B.weight", {r, C}, c.num_attention_heads);
    check(b + "attn_v.weight.lora_a", v + ".lora_A.weight", {C, r}, 0);
    check(b + "attn_v.weight.lora_b", v + ".lora_B.weight", {r, kv}, 0);
  }
  check("output.weight.lora_a", "lm_head.lora_A.weight", {C, r}, 0);
  check("output.weight.lora_b", "lm_head.lora_B.weight", {r, V}, 0);
}

TEST(GgufExport, LoraErrors) {
  Transformer plain(testing::tiny_config(), Precision::fp32, LoraConfig{});
  EXPECT_THROW(export_gguf_lora(plain, temp_path("x.gguf"), "x"), Error);
  LoraConfig lora;
  lora.enabled = true, lora.targets = {"q", "lm_head"};
  Transformer tied(testing::tiny_config(/*tied=*/true), Precision::fp32, lora);
  EXPECT_THROW(export_gguf_lora(tied, temp_path("x.gguf"), "x"), Error);
  lora.targets = {"q"}, lora.alpha = 0.0f;
  Transformer zero_alpha(testing::tiny_config(), Precision::fp32, lora);
  EXPECT_THROW(export_gguf_lora(zero_alpha, temp_path("x.gguf"), "x"), Error);
  EXPECT_FALSE(std::filesystem::exists(temp_path("x.gguf")));
}

// ----------------------------------------------------------------------------------------------

class GgufReaderRejects : public ::testing::Test {
 protected:
  void SetUp() override {
    Transformer m(testing::tiny_config(), Precision::fp32, LoraConfig{});
    m.init_weights(17);
    const std::string path = temp_path("good.gguf");
    export_gguf_model(m, path, nullptr, GgufDtype::f32);
    good = file_bytes(path);
    std::filesystem::remove(path);
    ASSERT_NO_THROW(parse_gguf(good, "good"));
  }
  static void expect_error(std::vector<char> b, const std::string& fragment) {
    try {
      parse_gguf(std::move(b), "bad.gguf");
      ADD_FAILURE() << "no error; expected one mentioning '" << fragment << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("bad.gguf"), std::string::npos) << e.what();
    }
  }
  std::vector<char> good;
};

TEST_F(GgufReaderRejects, TruncatedFiles) {
  for (size_t n : {size_t(0), size_t(3), size_t(10), size_t(30), good.size() / 8, good.size() / 2, good.size() - 1}) {
    SCOPED_TRACE(n);
    std::vector<char> b(good.begin(), good.begin() + std::ptrdiff_t(n));
    EXPECT_THROW(parse_gguf(b, "bad.gguf"), Error);
  }
  // Cut inside the tensor infos: the counts still fit, the infos do not.
  const std::string name = "blk.1.attn_q.weight";
  auto it = std::search(good.begin(), good.end(), name.begin(), name.end());
  ASSERT_NE(it, good.end());
  expect_error(std::vector<char>(good.begin(), it + 3), "truncated");
  expect_error(std::vector<char>(good.begin(), good.begin() + 100), "metadata count");
  expect_error(std::vector<char>(good.begin(), good.end() - 40), "beyond the data section");
}

TEST_F(GgufReaderRejects, BadMagicVersionCountsAndTypes) {
  std::vector<char> b = good;
  b[0] = 'X';
  expect_error(b, "bad magic");
  b = good;
  b[4] = 4;
  expect_error(b, "version 4");
  b = good;
  b[8 + 7] = 0x10;  // tensor count 2^60
  expect_error(b, "tensor count");
  b = good;
  b[16 + 6] = 0x10;  // kv count 2^52
  expect_error(b, "metadata count");
  b = good;
  // The first key is general.architecture (20 characters): its value type follows it.
  ASSERT_EQ(std::string(b.data() + 32, 20), "general.architecture");
  b[52] = 99;
  expect_error(b, "unknown value type 99");
  b = good;
  b[31] = 0x7f;  // the first key's length, now far beyond the file
  expect_error(b, "truncated");
}

TEST_F(GgufReaderRejects, TensorOffsetsOutOfRangeOrMisaligned) {
  // The first tensor info's offset field: after its name, n_dims, ne[2] and type.
  const std::string name = "token_embd.weight";
  auto it = std::search(good.begin(), good.end(), name.begin(), name.end());
  ASSERT_NE(it, good.end());
  const size_t off_at = size_t(it - good.begin()) + name.size() + 4 + 16 + 4;
  std::vector<char> b = good;
  b[off_at] = 1;  // offset 1: misaligned
  expect_error(b, "not aligned");
  b = good;
  b[off_at + 5] = 1;  // offset 2^40: past the end
  expect_error(b, "beyond the data section");
}

// Two tensors whose data share bytes would alias each other: the second tensor's offset set to the
// first one's is refused, naming both.
TEST_F(GgufReaderRejects, OverlappingTensorData) {
  const GgufFile parsed = parse_gguf(good, "good");
  ASSERT_GE(parsed.tensors.size(), 2u);
  const GgufTensorInfo& second = parsed.tensors[1];
  ASSERT_GT(second.offset, 0u);
  auto it = std::search(good.begin(), good.end(), second.name.begin(), second.name.end());
  ASSERT_NE(it, good.end());
  const size_t off_at = size_t(it - good.begin()) + second.name.size() + 4 + 8 * second.ne.size() + 4;
  uint64_t stored = 0;
  std::memcpy(&stored, good.data() + off_at, 8);
  ASSERT_EQ(stored, second.offset);
  std::vector<char> b = good;
  const uint64_t first_offset = parsed.tensors[0].offset;
  std::memcpy(b.data() + off_at, &first_offset, 8);
  expect_error(b, "overlaps tensor '" + parsed.tensors[0].name + "'");
}

// Issue 34, item 7. Was: a key given twice was read as its first value (llama.cpp may take
// another). Now refused: llama.rope.freq_base renamed llama.context_length (both 20 characters).
TEST_F(GgufReaderRejects, DuplicateMetadataKeys) {
  const std::string name = "llama.rope.freq_base";
  auto it = std::search(good.begin(), good.end(), name.begin(), name.end());
  ASSERT_NE(it, good.end());
  std::vector<char> b = good;
  const std::string other = "llama.context_length";
  ASSERT_NE(std::search(good.begin(), good.end(), other.begin(), other.end()), good.end());
  std::copy(other.begin(), other.end(), b.begin() + (it - good.begin()));
  expect_error(b, "duplicate metadata key 'llama.context_length'");
}

// Found by fuzz_gguf: two tensors of one name (the second unreadable by name) are refused.
TEST_F(GgufReaderRejects, DuplicateTensorNames) {
  const std::string name = "blk.1.attn_q.weight";
  auto it = std::search(good.begin(), good.end(), name.begin(), name.end());
  ASSERT_NE(it, good.end());
  std::vector<char> b = good;
  b[size_t(it - good.begin()) + 4] = '0';  // blk.1 -> blk.0, already in the file
  expect_error(b, "duplicate tensor name 'blk.0.attn_q.weight'");
}

// ----------------------------------------------------------------------------------------------

// llama2.c's tokenizer.bin as llama.cpp's "llama" vocabulary (data/ggml_vocab.h).
TEST(GgufTokenizer, Llama2cStories260K) {
  const std::string tok_path = std::string(MESHTRAIN_SOURCE_DIR) + "/../shared/data/stories260K/tok512.bin";
  if (!std::filesystem::exists(tok_path)) GTEST_SKIP() << tok_path << " not present";
  TokenizerInfo tok = ggml_vocab_of(*load_tokenizer(tok_path), 512);
  ASSERT_EQ(tok.tokens.size(), 512u);
  EXPECT_EQ(tok.model, "llama");
  EXPECT_EQ(tok.bos, 1);
  EXPECT_EQ(tok.eos, 2);
  EXPECT_EQ(tok.tokens[0], "<unk>");
  EXPECT_EQ(tok.tokens[1], "<s>");
  EXPECT_EQ(tok.tokens[2], "</s>");
  EXPECT_EQ(tok.tokens[3], "<0x00>");
  EXPECT_EQ(tok.tokens[259], "\xE2\x96\x81t");  // " t" with sentencepiece's word marker restored
  EXPECT_EQ(tok.scores[260], -1.0f);
  std::vector<int> counts(7);
  for (int32_t t : tok.token_types) counts[size_t(t)]++;
  EXPECT_EQ(tok.token_types[0], kTokenUnknown);
  EXPECT_EQ(tok.token_types[1], kTokenControl);
  EXPECT_EQ(tok.token_types[2], kTokenControl);
  EXPECT_EQ(counts[kTokenByte], 256);
  EXPECT_EQ(counts[kTokenNormal], 512 - 3 - 256);

  // And written into a model file.
  ModelConfig c = testing::tiny_config();
  c.vocab_size = 512;
  Transformer m(c, Precision::fp32, LoraConfig{});
  m.init_weights(18);
  const std::string path = temp_path("tok.gguf");
  export_gguf_model(m, path, &tok, GgufDtype::f16);
  GgufFile g = read_gguf(path);
  std::filesystem::remove(path);
  EXPECT_EQ(g.get_str("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(g.get("tokenizer.ggml.tokens").strs, tok.tokens);
  EXPECT_EQ(g.get("tokenizer.ggml.tokens").elem, GgufType::string);
  const GgufValue& types = g.get("tokenizer.ggml.token_type");
  EXPECT_EQ(types.elem, GgufType::i32);
  EXPECT_EQ(std::vector<int64_t>(tok.token_types.begin(), tok.token_types.end()), types.ints);
  const GgufValue& scores = g.get("tokenizer.ggml.scores");
  EXPECT_EQ(scores.elem, GgufType::f32);
  EXPECT_EQ(std::vector<double>(tok.scores.begin(), tok.scores.end()), scores.floats);
  EXPECT_EQ(g.get_u32("tokenizer.ggml.bos_token_id"), 1u);
  EXPECT_EQ(g.get_u32("tokenizer.ggml.eos_token_id"), 2u);
  EXPECT_EQ(g.find("tokenizer.ggml.merges"), nullptr);
  EXPECT_EQ(g.find("tokenizer.ggml.pre"), nullptr);
  EXPECT_EQ(g.tensor("token_embd.weight").ne, (std::vector<uint64_t>{16, 512}));
}

TEST(GgufTokenizer, BpeFieldsAndVocabMismatch) {
  Transformer m(testing::tiny_config(), Precision::fp32, LoraConfig{});
  m.init_weights(19);
  TokenizerInfo tok;
  tok.model = "gpt2";
  tok.pre = "llama-bpe";
  // (std::string("t") += ...: "t" + std::string trips GCC 12's false -Wrestrict positive.)
  for (int k = 0; k < 32; ++k) tok.tokens.push_back(std::string("t") += std::to_string(k));
  tok.merges = {"t 1", "t 2"};
  tok.bos = 0, tok.eos = 31;
  const std::string path = temp_path("bpe.gguf");
  export_gguf_model(m, path, &tok, GgufDtype::f32);
  GgufFile g = read_gguf(path);
  std::filesystem::remove(path);
  EXPECT_EQ(g.get_str("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(g.get_str("tokenizer.ggml.pre"), "llama-bpe");
  EXPECT_EQ(g.get("tokenizer.ggml.merges").strs, tok.merges);
  EXPECT_EQ(g.find("tokenizer.ggml.scores"), nullptr);
  EXPECT_EQ(g.get_u32("tokenizer.ggml.eos_token_id"), 31u);
  tok.tokens.pop_back();
  EXPECT_THROW(export_gguf_model(m, path, &tok, GgufDtype::f32), Error);
}

}  // namespace
}  // namespace mt
