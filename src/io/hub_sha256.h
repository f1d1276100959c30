// SHA-256 (FIPS 180-4), streamed: the Hub names a large (LFS) file by the SHA-256 of its bytes, and a
// downloaded blob is checked against that name before it enters the cache (io/hub_download.h).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace mt::hub {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t n);
  // The digest as 64 lowercase hex digits; the object is spent afterwards.
  std::string hex();

 private:
  void block(const uint8_t* p);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buf_{};
  size_t buffered_ = 0;
  uint64_t total_ = 0;
};

// The SHA-256 of the file at `path` (hex), read in pieces; mt::Error when it cannot be read.
std::string sha256_of_file(const std::string& path);

}  // namespace mt::hub
