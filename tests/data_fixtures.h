// Helpers shared by the training-data tests: shared-data paths, temp files (temp_dirs.h), error
// capture and a tokenizer wrapper that counts encode() calls (to prove the token cache skips
// tokenising).
#pragma once
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>

#include "error_of.h"
#include "temp_dirs.h"
#include "core/error.h"
#include "data/tokenizer.h"

namespace mt::testdata {

inline std::string data_dir() { return std::string(MESHTRAIN_SOURCE_DIR) + "/../shared/data/"; }

#define MT_REQUIRE_DATA(rel)                                                             \
  do {                                                                                   \
    if (!std::filesystem::exists(::mt::testdata::data_dir() + (rel)))                    \
      GTEST_SKIP() << "shared data missing: " << ::mt::testdata::data_dir() + (rel);     \
  } while (0)

// Loading a tokenizer takes a moment; one instance per file for the whole test binary.
inline const Tokenizer& shared_tokenizer(const std::string& rel) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& slot = cache[rel];
  if (!slot) slot = load_tokenizer(data_dir() + rel);
  return *slot;
}

using ::mt::testing::TempDir;
using ::mt::error_of;

// Forwards to another tokenizer and counts encode() calls.
class CountingTokenizer final : public Tokenizer {
 public:
  explicit CountingTokenizer(const Tokenizer& inner) : inner_(inner) {
    set_special_tokens(inner.special_tokens());
  }
  std::string_view kind() const override { return inner_.kind(); }
  std::vector<int32_t> encode(std::string_view text) const override {
    ++calls;
    return inner_.encode(text);
  }
  std::string decode(const std::vector<int32_t>& ids) const override { return inner_.decode(ids); }
  int64_t vocab_size() const override { return inner_.vocab_size(); }
  int32_t bos_id() const override { return inner_.bos_id(); }
  int32_t eos_id() const override { return inner_.eos_id(); }

  mutable std::atomic<int64_t> calls{0};

 private:
  const Tokenizer& inner_;
};

}  // namespace mt::testdata
