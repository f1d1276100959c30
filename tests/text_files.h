// Small text helpers the tests share: a file's whole contents, how often a part occurs in a text
// (a command's output, a report), and the losses of a run's metrics.jsonl.
#pragma once
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

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

// The "loss" of each line of a run's metrics.jsonl, as written (for comparing runs digit for
// digit), and as numbers.
inline std::vector<std::string> metric_loss_texts(const std::filesystem::path& metrics) {
  std::vector<std::string> out;
  std::istringstream in(read_file(metrics));
  const std::regex loss(R"("loss":\s*([-0-9.eE+]+))");
  for (std::string line; std::getline(in, line);)
    if (std::smatch m; std::regex_search(line, m, loss)) out.push_back(m[1]);
  return out;
}

inline std::vector<double> metric_losses(const std::filesystem::path& metrics) {
  std::vector<double> out;
  for (const std::string& t : metric_loss_texts(metrics)) out.push_back(std::stod(t));
  return out;
}

}  // namespace mt::testing
