// The error the default run config with `overrides` (--set key=value) gets, or "accepted"; and a
// config file's text read as `meshtrain train --config` reads it: for the tests of the config's
// names and refusals.
#pragma once
#include <string>
#include <vector>

#include "core/error.h"
#include "error_of.h"
#include "train/run_config.h"

namespace mt::testing {

inline std::string config_error(const std::vector<std::string>& overrides) {
  try {
    parse_run_config(default_run_config_toml(), overrides, "<test>");
  } catch (const Error& e) {
    return e.what();
  }
  return "accepted";
}

inline RunConfig parse_config_text(const std::string& text, const std::vector<std::string>& overrides = {},
                                   std::vector<std::string>* renamed = nullptr) {
  return parse_run_config(text, overrides, "run.toml", renamed);
}

// What parse_config_text refuses `text` with, "" when it accepts it (error_of).
inline std::string config_text_error(const std::string& text, const std::vector<std::string>& overrides = {}) {
  return error_of([&] { parse_config_text(text, overrides); });
}

}  // namespace mt::testing
