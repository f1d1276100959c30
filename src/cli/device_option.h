// --device on the verbs that compute (train, bench, eval, generate): which device, and opening its
// backend before the verb reads or writes anything else (backend/backend_factory.h).
#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "backend/backend_factory.h"

namespace mt::cli {

struct DeviceOption {
  std::string name;  // empty: not given (train: train.device decides; the others: cpu)

  void add_to(CLI::App* sub, const std::string& fallback);
  bool given() const { return !name.empty(); }
  // The backend of `name` (or of `fallback` when not given) on this process's local rank's GPU;
  // mt::Error in one line naming --device (or `fallback_key`) when it cannot be opened.
  DeviceBackend open(const std::string& fallback = "cpu", const std::string& fallback_key = "--device",
                     bool share_gpu = false) const;
};

}  // namespace mt::cli
