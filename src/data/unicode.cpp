#include "data/unicode.h"

#include <algorithm>

namespace mt::unicode {
namespace {

struct CodeRange {
  uint32_t lo, hi;
};
#include "data/unicode_tables.inc"

template <size_t N>
bool in_ranges(const CodeRange (&table)[N], uint32_t cp) {
  // First range whose upper end is >= cp; cp is inside if that range starts at or before it.
  auto it = std::lower_bound(std::begin(table), std::end(table), cp,
                             [](const CodeRange& r, uint32_t c) { return r.hi < c; });
  return it != std::end(table) && it->lo <= cp;
}

}  // namespace

CodePoint decode_utf8(std::string_view s, size_t pos) {
  auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  unsigned char c0 = b(pos);
  if (c0 < 0x80) return {c0, 1};
  uint32_t len, cp, min;
  if ((c0 & 0xE0) == 0xC0) {
    len = 2, cp = c0 & 0x1F, min = 0x80;
  } else if ((c0 & 0xF0) == 0xE0) {
    len = 3, cp = c0 & 0x0F, min = 0x800;
  } else if ((c0 & 0xF8) == 0xF0) {
    len = 4, cp = c0 & 0x07, min = 0x10000;
  } else {
    return {kInvalid, 1};
  }
  if (pos + len > s.size()) return {kInvalid, 1};
  for (uint32_t i = 1; i < len; ++i) {
    unsigned char c = b(pos + i);
    if ((c & 0xC0) != 0x80) return {kInvalid, 1};
    cp = (cp << 6) | (c & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {kInvalid, 1};
  return {cp, len};
}

bool is_letter(uint32_t cp) {
  if (cp < 0x80) return (cp | 0x20) - 'a' < 26;  // ASCII fast path: most text is ASCII
  return cp != kInvalid && in_ranges(kLetterRanges, cp);
}

bool is_number(uint32_t cp) {
  if (cp < 0x80) return cp - '0' < 10;
  return cp != kInvalid && in_ranges(kNumberRanges, cp);
}

bool is_whitespace(uint32_t cp) {
  switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20:
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029:
    case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

const char* unicode_version() { return kUnicodeVersion; }

}  // namespace mt::unicode
