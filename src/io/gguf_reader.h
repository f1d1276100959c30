// A minimal GGUF reader: header, metadata, tensor infos and each tensor's bytes. It exists to
// validate what gguf_writer produces (tests, and a check after export), so it reads the whole file
// into memory and knows only the tensor types we write (F32, F16, BF16, Q8_0, Q4_0). Every malformed input
// (bad magic or version, counts or lengths running past the end, unknown types, duplicate tensor
// names, tensor data out of range or misaligned, rows that are not whole blocks) is an mt::Error naming the file and what is wrong.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/gguf_types.h"

namespace mt {

struct GgufTensorInfo {
  std::string name;
  std::vector<uint64_t> ne;  // ggml order: ne[0] is the fastest-varying dimension
  GgmlType type = GgmlType::f32;
  uint64_t offset = 0;       // relative to the data section
  uint64_t bytes = 0;
  std::vector<int64_t> shape() const;  // row-major (ne reversed)
  uint64_t numel() const;
};

class GgufFile {
 public:
  uint32_t version = 0;
  uint64_t alignment = kGgufDefaultAlignment;
  uint64_t data_offset = 0;  // absolute file offset of the data section
  std::vector<GgufKV> kvs;
  std::vector<GgufTensorInfo> tensors;
  std::vector<char> bytes;  // the whole file

  const GgufValue* find(const std::string& key) const;
  const GgufValue& get(const std::string& key) const;  // throws when absent
  // Typed scalar access; throws when absent or of another type.
  uint64_t get_u32(const std::string& key) const;
  float get_f32(const std::string& key) const;
  const std::string& get_str(const std::string& key) const;

  const GgufTensorInfo* find_tensor(const std::string& name) const;
  const GgufTensorInfo& tensor(const std::string& name) const;  // throws when absent
  const char* tensor_data(const GgufTensorInfo& t) const { return bytes.data() + data_offset + t.offset; }
  // F16 and BF16 widened exactly, Q8_0 and Q4_0 dequantised as llama.cpp does (code x scale).
  std::vector<float> tensor_f32(const std::string& name) const;

  std::string label;  // the path, for messages
};

GgufFile read_gguf(const std::string& path);
// The same on bytes already in memory; label names them in messages.
GgufFile parse_gguf(std::vector<char> bytes, const std::string& label);

}  // namespace mt
