#include "io/gguf_types.h"

#include "core/error.h"
#include "io/ggml_quants.h"

namespace mt {

int64_t ggml_block_size(GgmlType t) {
  return t == GgmlType::q4_0 || t == GgmlType::q8_0 ? kGgmlQuantBlock : 1;
}

size_t ggml_block_bytes(GgmlType t) {
  switch (t) {
    case GgmlType::f32: return 4;
    case GgmlType::f16: return 2;
    case GgmlType::bf16: return 2;
    case GgmlType::q4_0: return kQ4_0BlockBytes;
    case GgmlType::q8_0: return kQ8_0BlockBytes;
  }
  fail("gguf: unknown ggml type " + std::to_string(uint32_t(t)));
}

uint64_t ggml_tensor_bytes(GgmlType t, uint64_t numel, const std::string& what) {
  const uint64_t block = uint64_t(ggml_block_size(t));
  if (numel % block != 0)
    fail(what + ": " + std::to_string(numel) + " values are not whole " + ggml_type_name(t) + " blocks of " +
         std::to_string(block));
  return numel / block * ggml_block_bytes(t);
}

const char* ggml_type_name(GgmlType t) {
  switch (t) {
    case GgmlType::f32: return "F32";
    case GgmlType::f16: return "F16";
    case GgmlType::bf16: return "BF16";
    case GgmlType::q4_0: return "Q4_0";
    case GgmlType::q8_0: return "Q8_0";
  }
  return "?";
}

bool ggml_type_known(uint32_t t) { return t == 0 || t == 1 || t == 2 || t == 8 || t == 30; }

const char* gguf_type_name(GgufType t) {
  static const char* names[] = {"uint8", "int8",   "uint16", "int16", "uint32", "int32", "float32",
                                "bool",  "string", "array",  "uint64", "int64", "float64"};
  return uint32_t(t) < 13 ? names[uint32_t(t)] : "?";
}

GgufValue GgufValue::u32(uint32_t v) {
  GgufValue x;
  x.type = GgufType::u32, x.u = v;
  return x;
}
GgufValue GgufValue::i32(int32_t v) {
  GgufValue x;
  x.type = GgufType::i32, x.i = v;
  return x;
}
GgufValue GgufValue::f32(float v) {
  GgufValue x;
  x.type = GgufType::f32, x.f = v;
  return x;
}
GgufValue GgufValue::boolean(bool v) {
  GgufValue x;
  x.type = GgufType::boolean, x.u = v ? 1 : 0;
  return x;
}
GgufValue GgufValue::str(std::string v) {
  GgufValue x;
  x.type = GgufType::string, x.s = std::move(v);
  return x;
}
GgufValue GgufValue::str_array(std::vector<std::string> v) {
  GgufValue x;
  x.type = GgufType::array, x.elem = GgufType::string, x.strs = std::move(v);
  return x;
}
GgufValue GgufValue::i32_array(const std::vector<int32_t>& v) {
  GgufValue x;
  x.type = GgufType::array, x.elem = GgufType::i32, x.ints.assign(v.begin(), v.end());
  return x;
}
GgufValue GgufValue::f32_array(const std::vector<float>& v) {
  GgufValue x;
  x.type = GgufType::array, x.elem = GgufType::f32, x.floats.assign(v.begin(), v.end());
  return x;
}
GgufValue GgufValue::bool_array(const std::vector<bool>& v) {
  GgufValue x;
  x.type = GgufType::array, x.elem = GgufType::boolean, x.ints.assign(v.begin(), v.end());
  return x;
}

}  // namespace mt
