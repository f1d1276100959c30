#include "cli/input_lines.h"

#include <fstream>
#include <iostream>

#include "core/error.h"
#include "core/regular_file.h"
#include "data/unicode.h"

namespace mt::cli {

namespace {

// Reads the next line of `in` into `line` (without its '\n'), stopping as soon as it holds more
// than `cap` bytes: a line is never read whole before its length is checked. False at the end of
// the input.
bool read_line(std::streambuf& in, std::string& line, size_t cap, const std::string& where) {
  line.clear();
  int c = in.sbumpc();
  if (c == std::char_traits<char>::eof()) return false;
  for (; c != std::char_traits<char>::eof() && c != '\n'; c = in.sbumpc()) {
    if (line.size() == cap)
      fail(where + " is longer than the " + std::to_string(cap >> 20) + " MiB limit for an input line");
    line.push_back(char(c));
  }
  return true;
}

}  // namespace

void for_each_input_line(const std::string& path, size_t max_line_bytes,
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
  for (int64_t number = 1;; ++number) {
    const std::string where = name + ":" + std::to_string(number);
    if (!read_line(*in.rdbuf(), line, max_line_bytes, where)) break;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    visit(line, where);
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
