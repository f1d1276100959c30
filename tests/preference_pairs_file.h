// A small file of prompt / chosen / rejected pairs for whole preference-training runs: 24 pairs
// of short ASCII strings (every sequence under 64 byte-level tokens), in a fresh temp directory.
#pragma once
#include <fstream>
#include <string>

#include "temp_dirs.h"

namespace mt::testing {

inline std::string preference_pairs_file() {
  const std::string path = fresh_temp_dir("preference_pairs") + "/pairs.jsonl";
  std::ofstream f(path);
  const char* words[] = {"river", "baker", "mill", "bread", "green", "boat", "stars", "bell"};
  for (int i = 0; i < 24; ++i) {
    const std::string a = words[i % 8], b = words[(i * 3 + 1) % 8];
    f << R"({"prompt": "Q)" << i << " " << a << R"(? ", "chosen": "The )" << a << " is by the " << b
      << R"(.", "rejected": ")" << b << " " << b << R"(!"})" << "\n";
  }
  return path;
}

}  // namespace mt::testing
