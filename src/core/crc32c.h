// CRC32C (Castagnoli polynomial, reflected, as in iSCSI, ext4 and RocksDB): the checksum stored
// for every checkpoint shard file so that a flipped bit on disk is caught when the file is loaded
// rather than steps later as a diverging loss. Check value: crc32c("123456789") == 0xE3069283.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace mt {

// The CRC32C of `crc`'s bytes followed by data[0, n): crc32c_extend(crc32c(a), b) == crc32c(a + b),
// so a file can be checksummed piece by piece as it is written or read.
uint32_t crc32c_extend(uint32_t crc, const void* data, size_t n);
inline uint32_t crc32c(const void* data, size_t n) { return crc32c_extend(0, data, n); }

// As stored in manifests: eight lowercase hex digits ("e3069283"). parse returns false on
// anything else, leaving `out` unchanged.
std::string crc32c_hex(uint32_t crc);
bool parse_crc32c_hex(const std::string& text, uint32_t& out);

}  // namespace mt
