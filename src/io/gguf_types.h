// The pieces of the GGUF format shared by the writer and the reader: metadata value types,
// the ggml tensor types we emit, and one value type able to hold any metadata value we use.
// Layout reference (GGUF v3, all little-endian):
//   "GGUF" | u32 version | u64 tensor_count | u64 kv_count | kv pairs | tensor infos |
//   padding to general.alignment | tensor data (each tensor aligned, offsets relative to here)
// A string is u64 length + bytes (no terminator); an array is u32 element type + u64 count +
// elements.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mt {

inline constexpr uint32_t kGgufVersion = 3;
inline constexpr uint32_t kGgufDefaultAlignment = 32;

enum class GgufType : uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7,
  string = 8, array = 9, u64 = 10, i64 = 11, f64 = 12,
};

// ggml_type values of the tensor element types we write (the reader knows only these too).
// Q4_0 and Q8_0 store blocks of 32 values (io/ggml_quants.h); the others one value at a time.
enum class GgmlType : uint32_t { f32 = 0, f16 = 1, q4_0 = 2, q8_0 = 8, bf16 = 30 };

int64_t ggml_block_size(GgmlType t);   // values per block (1 for the float types)
size_t ggml_block_bytes(GgmlType t);   // bytes per block
// Bytes of numel values; throws mt::Error naming `what` when numel is not whole blocks.
uint64_t ggml_tensor_bytes(GgmlType t, uint64_t numel, const std::string& what);
const char* ggml_type_name(GgmlType t);
bool ggml_type_known(uint32_t t);

// One metadata value. Scalars use one of u / i / f / s by type; arrays set elem and one of the
// vectors (integers and bools in ints, floats in floats, strings in strs). Nested arrays are not
// supported (llama.cpp's files do not use them).
struct GgufValue {
  GgufType type = GgufType::u32;
  GgufType elem = GgufType::u8;  // arrays only
  uint64_t u = 0;                // u8..u64 and bool
  int64_t i = 0;                 // i8..i64
  double f = 0.0;                // f32, f64
  std::string s;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strs;

  static GgufValue u32(uint32_t v);
  static GgufValue i32(int32_t v);
  static GgufValue f32(float v);
  static GgufValue boolean(bool v);
  static GgufValue str(std::string v);
  static GgufValue str_array(std::vector<std::string> v);
  static GgufValue i32_array(const std::vector<int32_t>& v);
  static GgufValue f32_array(const std::vector<float>& v);
  static GgufValue bool_array(const std::vector<bool>& v);
};

struct GgufKV {
  std::string key;
  GgufValue value;
};

const char* gguf_type_name(GgufType t);

}  // namespace mt
