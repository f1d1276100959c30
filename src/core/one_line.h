// An error message made one line: a user's value quoted in it may hold newlines or other control
// characters (an argument with a line break, a file name with a tab), which would split the line
// a terminal or a log scanner reads as the error.
#pragma once
#include <cstdio>
#include <string>
#include <string_view>

namespace mt {

// `text` with each control character written as an escape: \n, \r, \t, else \xNN.
inline std::string one_line(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u != 0x7f) out += c;
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", u);
      out += hex;
    }
  }
  return out;
}

}  // namespace mt
