#include "data/byte_level.h"

#include <array>

#include "data/unicode.h"

namespace mt {
namespace {

// Code point -> byte for the 256 mapped characters (all below U+0144), -1 elsewhere.
std::array<int, 0x144> build_inverse() {
  std::array<int, 0x144> inv;
  inv.fill(-1);
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    inv[printable ? b : next++] = b;
  }
  return inv;
}

// Byte -> its mapped character, UTF-8 encoded.
std::array<std::string, 256> build_forward() {
  const std::array<int, 0x144> inv = build_inverse();
  std::array<std::string, 256> fwd;
  for (uint32_t cp = 0; cp < inv.size(); ++cp)
    if (inv[cp] >= 0)  // all below U+0800: one or two UTF-8 bytes
      fwd[inv[cp]] = cp < 0x80 ? std::string(1, char(cp))
                               : std::string{char(0xC0 | (cp >> 6)), char(0x80 | (cp & 0x3F))};
  return fwd;
}

}  // namespace

std::string bytes_to_byte_level(std::string_view bytes) {
  static const std::array<std::string, 256> fwd = build_forward();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += fwd[static_cast<unsigned char>(c)];
  return out;
}

std::optional<std::string> byte_level_to_bytes(std::string_view mapped) {
  static const std::array<int, 0x144> inv = build_inverse();
  std::string out;
  out.reserve(mapped.size());
  for (size_t pos = 0; pos < mapped.size();) {
    unicode::CodePoint u = unicode::decode_utf8(mapped, pos);
    if (u.cp >= inv.size() || inv[u.cp] < 0) return std::nullopt;
    out += char(inv[u.cp]);
    pos += u.len;
  }
  return out;
}

}  // namespace mt
