// Small text helpers the tests share: a file's whole contents, and how often a part occurs in a
// text (a command's output, a report).
#pragma once
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace mt::testing {

// The file's bytes; "" when it cannot be opened (the caller's next check then fails visibly).
inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline size_t count_of(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

}  // namespace mt::testing
