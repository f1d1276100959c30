#include "cli/input_lines.h"

#include <fstream>
#include <iostream>

#include "core/error.h"
#include "core/regular_file.h"
#include "data/unicode.h"

namespace mt::cli {

void for_each_input_line(const std::string& path,
                         const std::function<void(std::string_view, const std::string&)>& visit) {
  const bool standard_input = path == "-";
  std::ifstream file;
  if (!standard_input) {
    require_regular_file(path, "input");
    file.open(path, std::ios::binary);
    if (!file) fail("cannot open input '" + path + "'");
  }
  std::istream& in = standard_input ? std::cin : file;
  const std::string name = standard_input ? "stdin" : path;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    visit(line, name + ":" + std::to_string(number));
  }
  if (in.bad()) fail("cannot read " + name);
}

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const unicode::CodePoint u = unicode::decode_utf8(s, i);
    if (u.cp == unicode::kInvalid) return false;
    i += u.len;
  }
  return true;
}

}  // namespace mt::cli
