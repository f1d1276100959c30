// PNG files written by hand: 8-bit RGB, no row filter, the image data deflated by zlib. A chart of
// 1120 x 600 pixels takes a few KiB (stored uncompressed it would take 2 MB); any PNG reader opens
// them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mt::report {

struct Image {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;  // row-major, 3 bytes per pixel
};

// CRC-32 (the PNG and zlib one: reflected polynomial 0xEDB88320), each chunk's checksum.
uint32_t crc32(const uint8_t* data, size_t n, uint32_t crc = 0);

// The bytes of the PNG file of `image`.
std::vector<uint8_t> encode_png(const Image& image);
// Writes them to `path` (atomically). Throws mt::Error naming the file on failure.
void write_png(const std::string& path, const Image& image);

}  // namespace mt::report
