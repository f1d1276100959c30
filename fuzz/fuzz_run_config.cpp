// libFuzzer target: the run config (TOML, parse_run_config) with --set overrides. Built by
// scripts/fuzz.sh (clang++, libFuzzer, ASan, UBSan).
//
// The input up to its first NUL is the config file; each line after it is one --set override.
// Parsing must succeed or throw mt::Error, never anything else. A config that parses must survive
// the run.toml round trip the trainer relies on (`meshtrain train --config run.toml` repeats the
// run): to_toml's text parses again, to the same text.
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "train/run_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string in(reinterpret_cast<const char*>(data), size);
  const size_t nul = in.find('\0');
  std::vector<std::string> overrides;
  if (nul != std::string::npos)
    for (size_t start = nul + 1; start <= in.size();) {
      const size_t end = std::min(in.find('\n', start), in.size());
      overrides.push_back(in.substr(start, end - start));
      start = end + 1;
    }
  std::string written;
  try {
    written = mt::to_toml(mt::parse_run_config(in.substr(0, nul), overrides, "fuzz.toml"));
  } catch (const mt::Error&) {
    return 0;
  }
  try {
    if (mt::to_toml(mt::parse_run_config(written, {}, "run.toml")) != written) __builtin_trap();
  } catch (const mt::Error&) {
    __builtin_trap();  // accepted, then refused as written back
  }
  return 0;
}
