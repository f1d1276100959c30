// PNG files written by hand: 8-bit RGB, no filter, the image data in stored (uncompressed)
// deflate blocks inside a zlib stream. Charts are small (a few hundred KiB), so no compression
// library is needed; any PNG reader opens them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mt::report {

struct Image {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;  // row-major, 3 bytes per pixel
};

// CRC-32 (the PNG and zlib one: reflected polynomial 0xEDB88320) and Adler-32, as PNG needs them.
uint32_t crc32(const uint8_t* data, size_t n, uint32_t crc = 0);
uint32_t adler32(const uint8_t* data, size_t n);

// The bytes of the PNG file of `image`.
std::vector<uint8_t> encode_png(const Image& image);
// Writes them to `path` (atomically). Throws mt::Error naming the file on failure.
void write_png(const std::string& path, const Image& image);

}  // namespace mt::report
