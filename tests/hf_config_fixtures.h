// Helpers of the tests that read published config.json files (test_hf_families.cpp,
// test_gpt2_family.cpp, test_gemma3.cpp): a config with some keys changed, and the one-line error
// that a config the reader refuses gets.
#pragma once
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "error_of.h"
#include "io/hf_config.h"

namespace mt::testing {

// The config.json text `base` with `changes` made: each key set to its value, or removed where the
// value is the string "<erase>".
inline std::string config_with(const std::string& base, const nlohmann::json& changes) {
  nlohmann::json j = nlohmann::json::parse(base);
  for (auto& [k, v] : changes.items()) {
    if (v.is_string() && v == "<erase>") j.erase(k);
    else j[k] = v;
  }
  return j.dump();
}

// Reading `text` as a config.json fails with one line that contains `needle`.
inline void expect_config_error(const std::string& text, const std::string& needle) {
  const std::string msg = error_of([&] { parse_hf_config(text, "config.json"); });
  if (msg.empty()) {
    ADD_FAILURE() << "accepted; expected an error containing: " << needle;
    return;
  }
  EXPECT_NE(msg.find(needle), std::string::npos) << msg;
}

}  // namespace mt::testing
