// A tensor shape as text, "[4096, 512]", for messages and tables.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mt {

inline std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace mt
