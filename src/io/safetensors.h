// Reader for the safetensors format (https://huggingface.co/docs/safetensors):
//
//   [8 bytes: header length N, little-endian u64][N bytes: JSON header][data section]
//
// The header maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]}, offsets
// relative to the start of the data section, plus an optional "__metadata__" object of strings.
//
// SafetensorsFile maps the file (mmap, read-only, MAP_PRIVATE) and validates the whole header
// when opened, so every later access is in bounds. Tensor bytes are never copied until asked
// for: bytes() is a view into the mapping, and the typed reads touch only the bytes they return
// (a row slice is one contiguous range; a column slice reads ncols elements per row).
//
// Every problem with the file is an mt::Error whose one-line message starts with the file name.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/bf16.h"
#include "core/mapped_file.h"
#include "io/safetensors_dtype.h"

namespace mt {

struct TensorInfo {
  std::string name;
  FileDtype dtype = FileDtype::F32;
  std::vector<int64_t> shape;  // [] is a scalar (one element)
  uint64_t numel = 0;
  uint64_t data_begin = 0, data_end = 0;  // "data_offsets": relative to the data section
  uint64_t file_offset = 0;                // absolute offset of the first byte in the file
  uint64_t nbytes() const { return data_end - data_begin; }
};

// The validated content of a header.
struct SafetensorsHeader {
  std::vector<TensorInfo> tensors;  // sorted by data offset (the order of their bytes in the file)
  std::unordered_map<std::string, size_t> index;  // name -> position in tensors
  std::map<std::string, std::string> metadata;    // "__metadata__", empty when absent
  uint64_t data_start = 0;                        // 8 + header length
};

class SafetensorsFile {
 public:
  // Maps and validates the file; mt::Error "<path>: <problem>" if it is not a valid safetensors file.
  explicit SafetensorsFile(const std::string& path);

  // Validates the header of a complete file held in memory (the bytes after the header are not
  // read, only their extent matters). `name` prefixes every error. The mmap path and the fuzzer
  // both go through this. Checks: file shorter than 8 bytes, header length past the end of the
  // file or over 100 MB, header not JSON / not an object / duplicate keys / nested too deep, an
  // entry missing dtype, shape or data_offsets or with the wrong JSON types, unknown dtype,
  // negative dimension, element count overflow, offsets out of the data section, begin > end,
  // overlapping ranges, shape x dtype size != byte range, "__metadata__" not an object of strings.
  static SafetensorsHeader parse_header(std::string_view file_bytes, const std::string& name);

  const std::string& path() const { return path_; }
  std::vector<std::string> names() const;  // in the order of their data in the file
  bool contains(const std::string& name) const { return header_.index.count(name) != 0; }
  const TensorInfo& info(const std::string& name) const;  // mt::Error if there is no such tensor
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }

  // The tensor's raw little-endian bytes, zero-copy: a view into the mapping, valid as long as
  // this object lives. Works for every dtype.
  std::span<const std::byte> bytes(const std::string& name) const;

  // Whole tensor converted to float / bf16; dst holds info(name).numel elements. The tensor must
  // be F32, BF16 or F16, otherwise an mt::Error names the tensor and its dtype.
  void read_f32(const std::string& name, float* dst) const;
  void read_bf16(const std::string& name, bf16* dst) const;

  // Rows [row0, row0 + nrows) along the first dimension (any rank >= 1; for a 2-D [R, C] tensor,
  // dst gets nrows * C elements). Reads one contiguous byte range.
  void read_rows_f32(const std::string& name, int64_t row0, int64_t nrows, float* dst) const;
  void read_rows_bf16(const std::string& name, int64_t row0, int64_t nrows, bf16* dst) const;
  // Columns [col0, col0 + ncols) of a 2-D [R, C] tensor; dst gets R x ncols, row-major. Reads
  // ncols elements from each row and nothing else.
  void read_cols_f32(const std::string& name, int64_t col0, int64_t ncols, float* dst) const;
  void read_cols_bf16(const std::string& name, int64_t col0, int64_t ncols, bf16* dst) const;

 private:
  template <class T> void read_all(const std::string& name, T* dst) const;
  template <class T> void read_rows(const std::string& name, int64_t row0, int64_t nrows, T* dst) const;
  template <class T> void read_cols(const std::string& name, int64_t col0, int64_t ncols, T* dst) const;
  const TensorInfo& readable(const std::string& name) const;  // info(), dtype checked for reads
  const std::byte* data(const TensorInfo& t) const { return map_.bytes().data() + t.file_offset; }

  std::string path_;
  MappedFile map_;
  SafetensorsHeader header_;
};

}  // namespace mt
