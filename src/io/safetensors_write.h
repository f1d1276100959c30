// Writer for the safetensors format: an 8-byte little-endian header length, a JSON header
// mapping names to {dtype, shape, data_offsets} (plus "__metadata__"), padded with spaces to a
// multiple of 8 bytes, then the raw tensor bytes in header order. Written atomically.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mt {

struct TensorOut {
  std::string name;
  std::string dtype;  // "F32", "BF16", "F16"
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t bytes = 0;
};

void write_safetensors(const std::string& path, const std::vector<TensorOut>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace mt
