#include "data/unicode.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

namespace mt::unicode {
namespace {

struct CodeRange {
  uint32_t lo, hi;
};
struct CombiningClassRange {
  uint32_t lo, hi;
  uint8_t ccc;
};
// One step of a canonical decomposition: cp -> first (+ second, 0 for a singleton); `composes`
// when NFC recombines the pair (primary composites, i.e. not a composition exclusion).
struct CanonicalDecomposition {
  uint32_t cp, first, second;
  uint8_t composes;
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

namespace {

// Hangul syllables: composed and decomposed by arithmetic (Unicode 3.12).
constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount,
                   kSCount = kLCount * kNCount;
// Invalid UTF-8 bytes travel through NFC as this marker | byte: class 0, never composed.
constexpr uint32_t kRawByte = 0x80000000;

uint8_t combining_class(uint32_t cp) {
  if (cp < 0x300 || (cp & kRawByte)) return 0;
  auto it = std::lower_bound(std::begin(kCombiningClassRanges), std::end(kCombiningClassRanges), cp,
                             [](const CombiningClassRange& r, uint32_t c) { return r.hi < c; });
  return it != std::end(kCombiningClassRanges) && it->lo <= cp ? it->ccc : 0;
}

const CanonicalDecomposition* decomposition_of(uint32_t cp) {
  auto it = std::lower_bound(std::begin(kCanonicalDecompositions), std::end(kCanonicalDecompositions), cp,
                             [](const CanonicalDecomposition& d, uint32_t c) { return d.cp < c; });
  return it != std::end(kCanonicalDecompositions) && it->cp == cp ? &*it : nullptr;
}

void decompose(uint32_t cp, std::vector<uint32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const uint32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount) out.push_back(kTBase + s % kTCount);
    return;
  }
  if (const CanonicalDecomposition* d = decomposition_of(cp)) {
    decompose(d->first, out);
    if (d->second) decompose(d->second, out);
    return;
  }
  out.push_back(cp);
}

// The primary composite of (first, second), or 0.
uint32_t compose(uint32_t first, uint32_t second) {
  if (first >= kLBase && first < kLBase + kLCount && second >= kVBase && second < kVBase + kVCount)
    return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
  if (first >= kSBase && first < kSBase + kSCount && (first - kSBase) % kTCount == 0 &&
      second > kTBase && second < kTBase + kTCount)
    return first + (second - kTBase);
  static const std::unordered_map<uint64_t, uint32_t> pairs = [] {
    std::unordered_map<uint64_t, uint32_t> m;
    for (const CanonicalDecomposition& d : kCanonicalDecompositions)
      if (d.composes) m.emplace(uint64_t(d.first) << 32 | d.second, d.cp);
    return m;
  }();
  auto it = pairs.find(uint64_t(first) << 32 | second);
  return it == pairs.end() ? 0 : it->second;
}

void append_utf8(uint32_t cp, std::string& out) {
  if (cp & kRawByte) {
    out += char(cp & 0xFF);
  } else if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | cp >> 6);
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | cp >> 12);
    out += char(0x80 | (cp >> 6 & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | cp >> 18);
    out += char(0x80 | (cp >> 12 & 0x3F));
    out += char(0x80 | (cp >> 6 & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

}  // namespace

std::string nfc(std::string_view text) {
  // Below U+0300 nothing decomposes or combines except Latin-1 letters that are already
  // composed; text of those alone (most text) is NFC as it stands.
  bool trivial = true;
  for (size_t pos = 0; pos < text.size() && trivial;) {
    CodePoint u = decode_utf8(text, pos);
    trivial = u.cp < 0x300;
    pos += u.len;
  }
  if (trivial) return std::string(text);
  std::vector<uint32_t> cps;
  cps.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    CodePoint u = decode_utf8(text, pos);
    if (u.cp == kInvalid) cps.push_back(kRawByte | static_cast<unsigned char>(text[pos]));
    else decompose(u.cp, cps);
    pos += u.len;
  }
  // Canonical ordering: each run of non-starters sorted by class, stable.
  for (size_t i = 0; i < cps.size();) {
    if (combining_class(cps[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < cps.size() && combining_class(cps[j]) != 0) ++j;
    std::stable_sort(cps.begin() + long(i), cps.begin() + long(j),
                     [](uint32_t a, uint32_t b) { return combining_class(a) < combining_class(b); });
    i = j;
  }
  // Canonical composition: a character joins the last starter unless something between them
  // blocks it (a character of the same or a higher class, or any starter).
  std::vector<uint32_t> out;
  out.reserve(cps.size());
  size_t starter = SIZE_MAX;
  uint8_t last_class = 0;
  for (uint32_t cp : cps) {
    const uint8_t cls = combining_class(cp);
    if (starter != SIZE_MAX && !(cp & kRawByte)) {
      const bool adjacent = out.size() - 1 == starter;
      if (adjacent || (last_class != 0 && last_class < cls))
        if (uint32_t composite = compose(out[starter], cp)) {
          out[starter] = composite;
          continue;
        }
    }
    if (cls == 0) starter = (cp & kRawByte) ? SIZE_MAX : out.size();
    out.push_back(cp);
    last_class = cls;
  }
  std::string result;
  result.reserve(text.size());
  for (uint32_t cp : out) append_utf8(cp, result);
  return result;
}

const char* unicode_version() { return kUnicodeVersion; }

}  // namespace mt::unicode
