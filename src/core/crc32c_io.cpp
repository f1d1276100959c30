#include "core/crc32c_io.h"

#include <fstream>
#include <vector>

#include "core/crc32c.h"
#include "core/error.h"

namespace mt {

Crc32cOstream::Crc32cOstream(std::ostream& target) : std::ostream(nullptr) {
  buf_.target = &target;
  rdbuf(&buf_);
}

std::streamsize Crc32cOstream::Buf::xsputn(const char* s, std::streamsize n) {
  target->write(s, n);
  if (!*target) return 0;  // short write: our ostream goes bad too
  crc = crc32c_extend(crc, s, size_t(n));
  return n;
}

Crc32cOstream::Buf::int_type Crc32cOstream::Buf::overflow(int_type c) {
  if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
  const char ch = traits_type::to_char_type(c);
  return xsputn(&ch, 1) == 1 ? c : traits_type::eof();
}

uint32_t crc32c_of_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path + ": cannot open for reading");
  std::vector<char> chunk(size_t(1) << 20);
  uint32_t crc = 0;
  while (in) {
    in.read(chunk.data(), std::streamsize(chunk.size()));
    crc = crc32c_extend(crc, chunk.data(), size_t(in.gcount()));
  }
  if (in.bad()) fail(path + ": read failed");
  return crc;
}

}  // namespace mt
