// Writes the seed corpus for fuzz_safetensors_header into the directory given as argv[1]:
// a few valid files from the real writer (so the fuzzer starts from the shapes it must accept)
// and truncations of one of them (so it starts near the length and bounds checks too).
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "io/safetensors_write.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const std::string dir = argv[1];
  const float f32[6] = {1, -2, 0.5f, 0, 3, 4};
  const uint16_t half[4] = {0x3c00, 0x0001, 0x7c00, 0x7e00};
  const int64_t ids[2] = {7, 9};
  mt::write_safetensors(dir + "/f32.safetensors", {{"w", "F32", {2, 3}, f32, 24}}, {{"format", "pt"}});
  mt::write_safetensors(dir + "/mixed.safetensors",
                        {{"a", "BF16", {2, 2}, half, 8},
                         {"b", "F16", {4}, half, 8},
                         {"ids", "I64", {2}, ids, 16},
                         {"s", "F32", {}, f32, 4},
                         {"e", "F32", {0, 3}, f32, 0}},
                        {{"format", "pt"}, {"note", "seed"}});
  mt::write_safetensors(dir + "/empty.safetensors", {});

  std::ifstream in(dir + "/mixed.safetensors", std::ios::binary);
  const std::string whole((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (size_t cut : {size_t(4), size_t(8), size_t(20), whole.size() / 2, whole.size() - 1})
    std::ofstream(dir + "/cut" + std::to_string(cut), std::ios::binary) << whole.substr(0, cut);
  return 0;
}
