#include "io/gguf_types.h"

#include "core/error.h"

namespace mt {

size_t ggml_type_size(GgmlType t) {
  switch (t) {
    case GgmlType::f32: return 4;
    case GgmlType::f16: return 2;
    case GgmlType::bf16: return 2;
  }
  fail("gguf: unknown ggml type " + std::to_string(uint32_t(t)));
}

const char* ggml_type_name(GgmlType t) {
  switch (t) {
    case GgmlType::f32: return "F32";
    case GgmlType::f16: return "F16";
    case GgmlType::bf16: return "BF16";
  }
  return "?";
}

bool ggml_type_known(uint32_t t) { return t == 0 || t == 1 || t == 30; }

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

}  // namespace mt
