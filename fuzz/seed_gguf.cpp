// Writes the seed corpus for fuzz_gguf into the directory given as argv[1]: files from the real
// writer (every metadata value type we write, each tensor type, Q8_0 and Q4_0 included, a
// non-default alignment) and truncations of one, so the fuzzer starts from the structure it must
// accept and near the bounds.
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "io/ggml_quants.h"
#include "io/gguf_writer.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const std::string dir = argv[1];
  using mt::GgufValue;
  const float f32[6] = {1, -2, 0.5f, 0, 3, 4};
  const uint16_t half[4] = {0x3c00, 0x0001, 0x7c00, 0x7e00};
  const std::vector<mt::GgufKV> kvs = {
      {"general.architecture", GgufValue::str("llama")},
      {"llama.block_count", GgufValue::u32(2)},
      {"llama.rope.freq_base", GgufValue::f32(10000.0f)},
      {"llama.context_length", GgufValue::i32(64)},
      {"tokenizer.ggml.add_bos_token", GgufValue::boolean(true)},
      {"tokenizer.ggml.tokens", GgufValue::str_array({"<s>", "a", "\xE6\x9D\xB1"})},
      {"tokenizer.ggml.token_type", GgufValue::i32_array({3, 1, 1})},
      {"tokenizer.ggml.scores", GgufValue::f32_array({0.0f, -1.5f, -2.0f})},
  };
  mt::write_gguf(dir + "/model.gguf", kvs,
                 {{"w", {2, 3}, mt::GgmlType::f32, f32, {}},
                  {"h", {4}, mt::GgmlType::f16, half, {}},
                  {"b", {2, 1, 2}, mt::GgmlType::bf16, half, {}}});
  // Quantised tensors: two rows of one Q8_0 block, one Q4_0 block, from the real quantisers.
  float row[64];
  for (int k = 0; k < 64; ++k) row[k] = float(k % 13) - 6.0f;
  std::vector<char> q8(2 * mt::kQ8_0BlockBytes), q4(mt::kQ4_0BlockBytes);
  mt::quantize_q8_0(row, 64, q8.data());
  mt::quantize_q4_0(row, 32, q4.data());
  mt::write_gguf(dir + "/quantised.gguf", {{"general.file_type", GgufValue::u32(7)}},
                 {{"q8", {2, 32}, mt::GgmlType::q8_0, q8.data(), {}},
                  {"q4", {32}, mt::GgmlType::q4_0, q4.data(), {}}});
  mt::write_gguf(dir + "/aligned.gguf", {{"general.name", GgufValue::str("x")}},
                 {{"w", {6}, mt::GgmlType::f32, f32, {}}}, 64);
  mt::write_gguf(dir + "/empty.gguf", {}, {});

  std::ifstream in(dir + "/model.gguf", std::ios::binary);
  const std::string whole((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (size_t cut : {size_t(4), size_t(8), size_t(24), whole.size() / 2, whole.size() - 1})
    std::ofstream(dir + "/cut" + std::to_string(cut), std::ios::binary) << whole.substr(0, cut);
  return 0;
}
