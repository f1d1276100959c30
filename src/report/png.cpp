#include "report/png.h"

#include <zlib.h>

#include <array>

#include "core/atomic_file.h"
#include "core/error.h"

namespace mt::report {
namespace {

const std::array<uint32_t, 256>& crc_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t n = 0; n < 256; ++n) {
      uint32_t c = n;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[n] = c;
    }
    return t;
  }();
  return table;
}

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(uint8_t(v >> shift));
}

// length, type, data, CRC of type and data
void put_chunk(std::vector<uint8_t>& out, const char* type, const std::vector<uint8_t>& data) {
  put_u32(out, uint32_t(data.size()));
  const size_t start = out.size();
  out.insert(out.end(), type, type + 4);
  out.insert(out.end(), data.begin(), data.end());
  put_u32(out, crc32(out.data() + start, out.size() - start));
}

// `raw` as a zlib stream (deflate at the best compression: a chart's long runs of one colour shrink
// to a few KiB).
std::vector<uint8_t> zlib_deflate(const std::vector<uint8_t>& raw) {
  uLongf size = compressBound(uLong(raw.size()));
  std::vector<uint8_t> z(size);
  if (compress2(z.data(), &size, raw.data(), uLong(raw.size()), Z_BEST_COMPRESSION) != Z_OK)
    fail("cannot deflate a PNG's image data (" + std::to_string(raw.size()) + " bytes): out of memory");
  z.resize(size);
  return z;
}

}  // namespace

uint32_t crc32(const uint8_t* data, size_t n, uint32_t crc) {
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = crc_table()[(crc ^ data[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

std::vector<uint8_t> encode_png(const Image& image) {
  std::vector<uint8_t> out{0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  std::vector<uint8_t> ihdr;
  put_u32(ihdr, uint32_t(image.width));
  put_u32(ihdr, uint32_t(image.height));
  ihdr.insert(ihdr.end(), {8, 2, 0, 0, 0});  // 8 bits, RGB, deflate, adaptive filters, no interlace
  put_chunk(out, "IHDR", ihdr);
  std::vector<uint8_t> raw;
  const size_t row = size_t(image.width) * 3;
  raw.reserve((row + 1) * size_t(image.height));
  for (int y = 0; y < image.height; ++y) {
    raw.push_back(0);  // filter: none
    const auto begin = image.rgb.begin() + ptrdiff_t(row * size_t(y));
    raw.insert(raw.end(), begin, begin + ptrdiff_t(row));
  }
  put_chunk(out, "IDAT", zlib_deflate(raw));
  put_chunk(out, "IEND", {});
  return out;
}

void write_png(const std::string& path, const Image& image) {
  const std::vector<uint8_t> bytes = encode_png(image);
  write_file_atomically(path, [&](std::ostream& os) {
    os.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  });
}

}  // namespace mt::report
