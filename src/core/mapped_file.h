// A whole file mapped read-only into memory (mmap, MAP_PRIVATE). Pages are read from disk only
// when touched, which is what lets a safetensors reader load one slice of a large tensor
// without reading the rest. The file must not be truncated while mapped (SIGBUS).
#pragma once
#include <cstddef>
#include <span>
#include <string>

namespace mt {

class MappedFile {
 public:
  MappedFile() = default;
  explicit MappedFile(const std::string& path);  // mt::Error naming path if it cannot be mapped
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::byte> bytes() const { return {data_, size_}; }

 private:
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace mt
