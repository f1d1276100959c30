// The error the default run config with `overrides` (--set key=value) gets, or "accepted": for
// the tests of the config's refusals.
#pragma once
#include <string>
#include <vector>

#include "core/error.h"
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

}  // namespace mt::testing
