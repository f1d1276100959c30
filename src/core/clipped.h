// A value quoted in an error message: whole when short, else its first ~100 bytes and how long it
// was, so a megabyte-long value (a TOML string, a JSON token) cannot fill the terminal.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace mt {

// `text` whole when at most `max` bytes, else its first ~`max` bytes (cut at a UTF-8 character
// boundary) followed by "... (N bytes)".
inline std::string clipped(std::string_view text, size_t max = 100) {
  if (text.size() <= max) return std::string(text);
  size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "... (" + std::to_string(text.size()) + " bytes)";
}

}  // namespace mt
