// Paths for the sentencepiece tests: the fixtures in tests/data/sentencepiece/ (made by
// scripts/make_spm_fixtures.sh) and the shared data beside the project.
#pragma once
#include <string>

namespace mt::testing::spm {

inline std::string fixture(const std::string& name) {
  return std::string(MESHTRAIN_SOURCE_DIR) + "/tests/data/sentencepiece/" + name;
}
inline std::string shared(const std::string& rel) {
  return std::string(MESHTRAIN_SOURCE_DIR) + "/../shared/data/" + rel;
}

}  // namespace mt::testing::spm
