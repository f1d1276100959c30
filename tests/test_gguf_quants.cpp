// ggml's Q8_0 and Q4_0 block quantisation (io/ggml_quants.h) and the quantised GGUF export:
// hand-worked block bytes, the per-value error bound, which tensors llama.cpp's convention
// quantises, file sizes, and the file read back (reader and `meshtrain generate` on a .gguf).
#include <gtest/gtest.h>


#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "core/error.h"
#include "core/f16.h"
#include "data_fixtures.h"
#include "io/ggml_quants.h"
#include "io/gguf_export.h"
#include "io/gguf_reader.h"
#include "io/gguf_writer.h"
#include "io/pretrained.h"
#include "model_fixtures.h"
#include "run_command.h"
#include "temp_dirs.h"

namespace mt {
namespace {

std::string temp_path(const std::string& name) {
  static const std::string dir = mt::testing::fresh_temp_dir("ggufq");
  return dir + "/" + name;
}

uint8_t byte_at(const std::vector<char>& b, size_t k) { return uint8_t(b[k]); }

TEST(GgmlQuants, Q8_0HandWorkedBlock) {
  // amax 127 makes d exactly 1 (f16 0x3c00), so each code is the value rounded (half away from 0).
  std::vector<float> x(32, 0.0f);
  x[0] = -127.0f, x[1] = 2.5f, x[2] = -2.5f, x[3] = 0.4f, x[4] = 126.6f, x[31] = 1.0f;
  std::vector<char> b(kQ8_0BlockBytes);
  quantize_q8_0(x.data(), 32, b.data());
  EXPECT_EQ(byte_at(b, 0), 0x00);
  EXPECT_EQ(byte_at(b, 1), 0x3c);
  EXPECT_EQ(int8_t(b[2 + 0]), -127);
  EXPECT_EQ(int8_t(b[2 + 1]), 3);
  EXPECT_EQ(int8_t(b[2 + 2]), -3);
  EXPECT_EQ(int8_t(b[2 + 3]), 0);
  EXPECT_EQ(int8_t(b[2 + 4]), 127);
  EXPECT_EQ(int8_t(b[2 + 31]), 1);
  std::vector<float> y(32);
  dequantize_q8_0(b.data(), 32, y.data());
  EXPECT_EQ(y[0], -127.0f);
  EXPECT_EQ(y[1], 3.0f);
  EXPECT_EQ(y[3], 0.0f);
}

TEST(GgmlQuants, Q4_0HandWorkedBlock) {
  // The value of largest magnitude is -8, so d = -8 / -8 = 1 and code = round(v) + 8, clamped to 15.
  std::vector<float> x(32, 0.0f);
  x[0] = -8.0f, x[1] = 3.0f, x[2] = -2.4f, x[3] = 0.5f, x[16] = 7.9f, x[17] = -0.5f;
  std::vector<char> b(kQ4_0BlockBytes);
  quantize_q4_0(x.data(), 32, b.data());
  EXPECT_EQ(byte_at(b, 0), 0x00);
  EXPECT_EQ(byte_at(b, 1), 0x3c);
  // Byte j: element j in the low nibble, element j + 16 in the high one.
  EXPECT_EQ(byte_at(b, 2 + 0), 0xF0);  // -8 -> 0; 7.9 -> 16, clamped to 15
  EXPECT_EQ(byte_at(b, 2 + 1), 0x8B);  // 3 -> 11; -0.5 -> 8 (round half up: floor(-0.5 + 8.5))
  EXPECT_EQ(byte_at(b, 2 + 2), 0x86);  // -2.4 -> 6
  EXPECT_EQ(byte_at(b, 2 + 3), 0x89);  // 0.5 -> 9
  for (size_t j = 4; j < 16; ++j) EXPECT_EQ(byte_at(b, 2 + j), 0x88) << j;
  std::vector<float> y(32);
  dequantize_q4_0(b.data(), 32, y.data());
  EXPECT_EQ(y[0], -8.0f);
  EXPECT_EQ(y[16], 7.0f);  // the clamp: the far end reaches only +7 d
  EXPECT_EQ(y[2], -2.0f);

  // A positive extreme gives a negative scale and is itself code 0, exactly.
  std::vector<float> p(32, 0.0f);
  p[5] = 4.0f, p[6] = -4.0f;
  quantize_q4_0(p.data(), 32, b.data());
  EXPECT_EQ(byte_at(b, 0), 0x00);
  EXPECT_EQ(byte_at(b, 1), 0xb8);  // f16 -0.5
  dequantize_q4_0(b.data(), 32, y.data());
  EXPECT_EQ(y[5], 4.0f);
  EXPECT_EQ(y[6], -3.5f);  // -4 / -0.5 = 8 -> code 16, clamped: 7 * -0.5
}

// Random blocks at scales from 1e-4 to 1e3. Each value's error is within half a step of the f32
// scale plus the f16 rounding of the scale times the code; Q4_0's clamped values (the far end of
// the range from the block's extreme) within one step.
TEST(GgmlQuants, RoundTripErrorWithinHalfAStepPerBlock) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t n = 32 * 400;
  std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
  for (int64_t b = 0; b < n / 32; ++b) {
    const float scale = std::pow(10.0f, float(b % 8) - 4.0f);
    for (int64_t j = 0; j < 32; ++j) x[size_t(b * 32 + j)] = nd(rng) * scale;
  }
  x[0] = 0.0f;
  for (int64_t j = 32; j < 64; ++j) x[size_t(j)] = 0.0f;  // an all-zero block: d 0, values 0
  // The largest error over d, for the record (a scale below f16's normal range, 2^-14, loses
  // relative precision: its blocks are bounded above but not counted here).
  double worst8 = 0, worst4 = 0;

  std::vector<char> q8(size_t(n / 32) * kQ8_0BlockBytes);
  quantize_q8_0(x.data(), n, q8.data());
  dequantize_q8_0(q8.data(), n, y.data());
  for (int64_t b = 0; b < n / 32; ++b) {
    float amax = 0;
    for (int64_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[size_t(b * 32 + j)]));
    const float d = amax / 127.0f, d16 = f16_to_float(float_to_f16(d));
    const double bound = d / 2.0 * (1 + 1e-6) + 127.0 * std::fabs(double(d) - d16);
    for (int64_t j = 0; j < 32; ++j) {
      const size_t k = size_t(b * 32 + j);
      const double err = std::fabs(double(x[k]) - y[k]);
      ASSERT_LE(err, bound) << "Q8_0 block " << b << " element " << j;
      if (d16 >= 6.103515625e-05f) worst8 = std::max(worst8, err / d);  // an f16-normal scale
    }
  }
  EXPECT_EQ(y[40], 0.0f);

  std::vector<char> q4(size_t(n / 32) * kQ4_0BlockBytes);
  quantize_q4_0(x.data(), n, q4.data());
  dequantize_q4_0(q4.data(), n, y.data());
  for (int64_t b = 0; b < n / 32; ++b) {
    float amax = 0, m = 0;
    for (int64_t j = 0; j < 32; ++j)
      if (std::fabs(x[size_t(b * 32 + j)]) > amax) amax = std::fabs(x[size_t(b * 32 + j)]), m = x[size_t(b * 32 + j)];
    const float d = m / -8.0f, d16 = f16_to_float(float_to_f16(d));
    const double slack = 8.0 * std::fabs(double(d) - d16) + 1e-6 * std::fabs(d);
    for (int64_t j = 0; j < 32; ++j) {
      const size_t k = size_t(b * 32 + j);
      const double err = std::fabs(double(x[k]) - y[k]);
      const bool clamped = d != 0 && x[k] * (1.0f / d) + 8.5f >= 16.0f;  // as the quantiser computes it
      ASSERT_LE(err, (clamped ? std::fabs(d) : std::fabs(d) / 2.0) + slack) << "Q4_0 block " << b << " element " << j;
      if (std::fabs(d16) >= 6.103515625e-05f && !clamped) worst4 = std::max(worst4, err / std::fabs(d));
    }
  }
  std::printf("largest error / d: Q8_0 %.4f, Q4_0 (unclamped) %.4f\n", worst8, worst4);
  EXPECT_THROW(quantize_q8_0(x.data(), 31, q8.data()), Error);
}

// A model whose every matrix row is a multiple of 32 values.
ModelConfig quantisable_config(bool tied) {
  ModelConfig c = testing::tiny_config(tied);
  c.hidden_size = 64, c.intermediate_size = 96;
  return c;
}

std::vector<float> quant_round_trip(const std::vector<float>& v, GgmlType t) {
  std::vector<char> b(ggml_tensor_bytes(t, v.size(), "test"));
  std::vector<float> out(v.size());
  if (t == GgmlType::q8_0) quantize_q8_0(v.data(), int64_t(v.size()), b.data()), dequantize_q8_0(b.data(), int64_t(v.size()), out.data());
  else quantize_q4_0(v.data(), int64_t(v.size()), b.data()), dequantize_q4_0(b.data(), int64_t(v.size()), out.data());
  return out;
}

uint64_t align32(uint64_t x) { return (x + 31) / 32 * 32; }

// Exports `dtype`, checks each tensor's type and bytes and the file size, then loads the file as
// a model (io/pretrained.h) and checks every weight is the original quantised and dequantised in
// the type the file holds it in (the q / k permutation moves whole rows, so it commutes with
// row-wise blocks).
void check_quantised_export(bool tied, GgufDtype dtype, GgmlType mat, const std::string& output_name,
                            GgmlType output_type, uint32_t file_type) {
  Transformer m(quantisable_config(tied), Precision::fp32, LoraConfig{});
  m.init_weights(21);
  const std::string path = temp_path("q.gguf");
  EXPECT_TRUE(export_gguf_model(m, path, nullptr, dtype).kept_f16.empty());
  GgufFile g = read_gguf(path);
  EXPECT_EQ(g.get_u32("general.file_type"), file_type);
  EXPECT_EQ(g.get_u32("general.quantization_version"), 2u);
  uint64_t data_bytes = 0;
  const GgufArchitecture& llama = *find_gguf_architecture("llama");
  for (const Param& p : m.base().params()) {
    const std::string name = gguf_tensor_name(llama, p.name);
    SCOPED_TRACE(name);
    const GgufTensorInfo& t = g.tensor(name);
    const GgmlType want = p.shape.size() == 1 ? GgmlType::f32 : name == output_name ? output_type : mat;
    EXPECT_EQ(t.type, want);
    const uint64_t per_block = want == GgmlType::q8_0 ? 34 : want == GgmlType::q4_0 ? 18 : 4 * 32;
    EXPECT_EQ(t.bytes, uint64_t(p.numel) / 32 * per_block);
    data_bytes += align32(t.bytes);
  }
  EXPECT_EQ(g.bytes.size(), g.data_offset + data_bytes);

  auto back = load_pretrained(path, Precision::fp32, LoraConfig{}, 0);
  for (const Param& p : m.base().params()) {
    SCOPED_TRACE(p.name);
    std::vector<float> want(p.master, p.master + p.numel), got(back->base().get(p.name).master,
                                                                 back->base().get(p.name).master + p.numel);
    const GgmlType t = g.tensor(gguf_tensor_name(llama, p.name)).type;
    if (t != GgmlType::f32) want = quant_round_trip(want, t);
    ASSERT_EQ(got, want);
  }
  std::filesystem::remove(path);
}

TEST(GgufQuantExport, Q8_0EveryMatrixNormsF32) {
  check_quantised_export(false, GgufDtype::q8_0, GgmlType::q8_0, "output.weight", GgmlType::q8_0, 7);
  check_quantised_export(true, GgufDtype::q8_0, GgmlType::q8_0, "token_embd.weight", GgmlType::q8_0, 7);
}

// llama-quantize raises the output matrix above Q4_0 (to Q6_K); the tied embedding is that matrix.
TEST(GgufQuantExport, Q4_0KeepsTheOutputMatrixAtQ8_0) {
  check_quantised_export(false, GgufDtype::q4_0, GgmlType::q4_0, "output.weight", GgmlType::q8_0, 2);
  check_quantised_export(true, GgufDtype::q4_0, GgmlType::q4_0, "token_embd.weight", GgmlType::q8_0, 2);
}

// tiny_config's rows (16 and 24 values) are not whole blocks: those matrices stay F16, named.
TEST(GgufQuantExport, RowsNotAMultipleOf32StayF16) {
  ModelConfig c = testing::tiny_config();
  c.intermediate_size = 32;  // down_proj rows (intermediate wide) are whole blocks, the rest not
  Transformer m(c, Precision::fp32, LoraConfig{});
  m.init_weights(22);
  const std::string path = temp_path("f16.gguf");
  const std::vector<std::string> kept = export_gguf_model(m, path, nullptr, GgufDtype::q4_0).kept_f16;
  GgufFile g = read_gguf(path);
  std::filesystem::remove(path);
  EXPECT_EQ(g.tensor("blk.0.ffn_down.weight").type, GgmlType::q4_0);
  EXPECT_EQ(g.tensor("blk.0.attn_q.weight").type, GgmlType::f16);
  EXPECT_EQ(g.tensor("token_embd.weight").type, GgmlType::f16);
  EXPECT_EQ(g.tensor("output.weight").type, GgmlType::f16);
  EXPECT_EQ(kept.size(), 2u + 6u * 2u);  // embedding, output, and per layer q k v o gate up
  EXPECT_NE(std::find(kept.begin(), kept.end(), "blk.1.ffn_up.weight"), kept.end());
  EXPECT_EQ(g.get_u32("general.file_type"), 2u);  // some matrices hold q4_0: labelled as llama-quantize does
}

// A q4_0 request that no matrix can take (every row 16 or 24 values) writes F16 and says so.
TEST(GgufQuantExport, FileTypeIsWhatTheMatricesHold) {
  Transformer m(testing::tiny_config(), Precision::fp32, LoraConfig{});
  m.init_weights(23);
  const std::string path = temp_path("all_f16.gguf");
  for (GgufDtype asked : {GgufDtype::q4_0, GgufDtype::q8_0}) {
    const GgufModelWritten w = export_gguf_model(m, path, nullptr, asked);
    GgufFile g = read_gguf(path);
    EXPECT_EQ(w.file_type, GgufDtype::f16);
    EXPECT_EQ(g.get_u32("general.file_type"), 1u);  // MOSTLY_F16
    EXPECT_EQ(g.find("general.quantization_version"), nullptr);
    for (const auto& t : g.tensors)
      EXPECT_TRUE(t.type == GgmlType::f16 || t.type == GgmlType::f32) << t.name;
  }
  std::filesystem::remove(path);
}

TEST(GgufQuantExport, WriterAndReaderRefusePartialBlocks) {
  const std::string path = temp_path("partial.gguf");
  std::vector<char> bytes(34 * 3);
  EXPECT_THROW(write_gguf(path, {}, {{"t", {2, 48}, GgmlType::q8_0, bytes.data(), {}}}), Error);
  EXPECT_FALSE(std::filesystem::exists(path));

  // A Q8_0 tensor of rows of 16 values, made by relabelling an F32 one: refused on reading.
  std::vector<float> f(64 * 16, 1.0f);
  write_gguf(path, {}, {{"t", {64, 16}, GgmlType::f32, f.data(), {}}});
  std::ifstream in(path, std::ios::binary);
  std::vector<char> b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(path);
  const char dims[] = {2, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0, 0, 0, 0, 0, 0};  // n_dims, ne
  auto at = std::search(b.begin(), b.end(), std::begin(dims), std::end(dims));
  ASSERT_NE(at, b.end());
  ASSERT_NO_THROW(parse_gguf(b, "f32.gguf"));
  *(at + sizeof(dims)) = 8;  // the type that follows: Q8_0
  try {
    parse_gguf(b, "bad.gguf");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not whole Q8_0 blocks"), std::string::npos) << e.what();
  }
}

// The user's path: stories260K exported as F32, Q8_0 and Q4_0, each file run by `meshtrain generate`.
// The F32 file gives the model's own text (so the loader undoes the export exactly); the
// quantised files load, are smaller, and their weights are the ones the file holds.
TEST(GgufQuantExport, GenerateRunsTheQuantisedFile) {
  MT_REQUIRE_DATA("stories260K/stories260K.bin");
  const std::string data = testdata::data_dir();
  const std::string dir = temp_path("stories");
  std::filesystem::remove_all(dir);
  using testing::run_meshtrain;
  auto r = run_meshtrain("convert --llama2c " + data + "stories260K/stories260K.bin --tokenizer " + data +
                         "stories260K/tok512.bin --out " + dir);
  ASSERT_EQ(r.code, 0) << r.output;
  const auto own = run_meshtrain("generate -m " + dir + " -n 30");
  ASSERT_EQ(own.code, 0) << own.output;
  std::map<std::string, uintmax_t> size;
  for (const char* t : {"f32", "q8_0", "q4_0"}) {
    const std::string file = dir + "/stories-" + t + ".gguf";
    r = run_meshtrain("export -m " + dir + " --gguf " + file + " --gguf-dtype " + t);
    ASSERT_EQ(r.code, 0) << r.output;
    // stories260K's ffn_down rows are 172 values (its hidden_dim): not whole blocks, so F16.
    if (std::string(t) != "f32") {
      EXPECT_NE(r.output.find("kept at f16 (rows not a multiple of 32 values, which " + std::string(t) +
                              " blocks need): blk.0.ffn_down.weight blk.1.ffn_down.weight"),
                std::string::npos)
          << r.output;
    }
    size[t] = std::filesystem::file_size(file);
    const auto gen = run_meshtrain("generate -m " + file + " -n 30");  // tokenizer: the directory's
    ASSERT_EQ(gen.code, 0) << gen.output;
    if (std::string(t) == "f32") {
      EXPECT_EQ(gen.output, own.output);
    }
    std::printf("%s: %s", t, gen.output.c_str());
  }
  EXPECT_LT(double(size["q8_0"]), double(size["f32"]) * 0.4);
  EXPECT_LT(size["q4_0"], size["q8_0"]);
}

}  // namespace
}  // namespace mt
