// Paths and bytes for the sentencepiece tests: the fixtures in tests/data/sentencepiece/ (made by
// scripts/make_spm_fixtures.sh) and the shared data beside the project.
#pragma once
#include <fstream>
#include <sstream>
#include <string>

namespace mt::testing::spm {

inline std::string fixture(const std::string& name) {
  return std::string(MESHTRAIN_SOURCE_DIR) + "/tests/data/sentencepiece/" + name;
}
inline std::string shared(const std::string& rel) {
  return std::string(MESHTRAIN_SOURCE_DIR) + "/../shared/data/" + rel;
}
inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace mt::testing::spm
