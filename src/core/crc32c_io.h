// CRC32C of bytes on their way to or from a file: an ostream that checksums everything written
// through it (so a writer learns its file's checksum without reading the file back), and the
// checksum of a file on disk (what a loader compares against the recorded one).
#pragma once
#include <cstdint>
#include <ostream>
#include <streambuf>
#include <string>

namespace mt {

// Writes pass straight through to `target`; crc() is the CRC32C of everything written so far.
// A failed write to `target` marks both streams bad, so the caller's own error checks on
// `target` (disk full) still fire.
class Crc32cOstream : public std::ostream {
 public:
  explicit Crc32cOstream(std::ostream& target);
  uint32_t crc() const { return buf_.crc; }

 private:
  struct Buf : std::streambuf {
    std::ostream* target = nullptr;
    uint32_t crc = 0;
    std::streamsize xsputn(const char* s, std::streamsize n) override;
    int_type overflow(int_type c) override;
  };
  Buf buf_;
};

// Reads the whole file; mt::Error naming `path` if it cannot be opened or read.
uint32_t crc32c_of_file(const std::string& path);

}  // namespace mt
