#include "io/safetensors_dtype.h"

#include <cstring>

#include "core/error.h"
#include "core/f16.h"

namespace mt {

namespace {
struct DtypeRow {
  FileDtype dtype;
  const char* name;
  size_t size;
};
constexpr DtypeRow kDtypes[] = {
    {FileDtype::BOOL, "BOOL", 1}, {FileDtype::U8, "U8", 1},     {FileDtype::I8, "I8", 1},
    {FileDtype::F8_E5M2, "F8_E5M2", 1}, {FileDtype::F8_E4M3, "F8_E4M3", 1},
    {FileDtype::I16, "I16", 2},   {FileDtype::U16, "U16", 2},   {FileDtype::F16, "F16", 2},
    {FileDtype::BF16, "BF16", 2}, {FileDtype::I32, "I32", 4},   {FileDtype::U32, "U32", 4},
    {FileDtype::F32, "F32", 4},   {FileDtype::F64, "F64", 8},   {FileDtype::I64, "I64", 8},
    {FileDtype::U64, "U64", 8},
};

const DtypeRow& row(FileDtype d) {
  for (const auto& r : kDtypes)
    if (r.dtype == d) return r;
  fail("internal error: dtype missing from the safetensors dtype table");
}

// The file is little-endian and so is every machine meshtrain builds for (x86-64, AArch64), so a
// memcpy per element is the load; it also makes unaligned sources safe.
template <class T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
}  // namespace

std::optional<FileDtype> dtype_from_string(std::string_view s) {
  for (const auto& r : kDtypes)
    if (s == r.name) return r.dtype;
  return std::nullopt;
}

const char* dtype_name(FileDtype d) { return row(d).name; }
size_t dtype_size(FileDtype d) { return row(d).size; }
bool dtype_is_convertible(FileDtype d) { return d == FileDtype::F32 || d == FileDtype::BF16 || d == FileDtype::F16; }

void convert_elements(FileDtype from, const std::byte* src, size_t n, float* dst) {
  if (n == 0) return;  // dst may then be null, which memcpy must not see
  switch (from) {
    case FileDtype::F32:
      std::memcpy(dst, src, n * 4);
      return;
    case FileDtype::BF16:
      for (size_t i = 0; i < n; ++i) dst[i] = to_float(bf16{load<uint16_t>(src + 2 * i)});
      return;
    case FileDtype::F16:
      for (size_t i = 0; i < n; ++i) dst[i] = f16_to_float(load<uint16_t>(src + 2 * i));
      return;
    default:
      MT_CHECK(false, std::string("convert_elements: unsupported dtype ") + dtype_name(from));
  }
}

void convert_elements(FileDtype from, const std::byte* src, size_t n, bf16* dst) {
  if (n == 0) return;
  switch (from) {
    case FileDtype::F32:
      for (size_t i = 0; i < n; ++i) dst[i] = float_to_bf16(load<float>(src + 4 * i));
      return;
    case FileDtype::BF16:
      std::memcpy(dst, src, n * 2);
      return;
    case FileDtype::F16:
      for (size_t i = 0; i < n; ++i) dst[i] = float_to_bf16(f16_to_float(load<uint16_t>(src + 2 * i)));
      return;
    default:
      MT_CHECK(false, std::string("convert_elements: unsupported dtype ") + dtype_name(from));
  }
}

}  // namespace mt
