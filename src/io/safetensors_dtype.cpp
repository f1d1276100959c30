#include "io/safetensors_dtype.h"

#include <cstring>

#include "core/error.h"
#include "core/f16.h"

namespace mt {

namespace {
struct DtypeRow {
  Dtype dtype;
  const char* name;
  size_t size;
};
constexpr DtypeRow kDtypes[] = {
    {Dtype::BOOL, "BOOL", 1}, {Dtype::U8, "U8", 1},     {Dtype::I8, "I8", 1},
    {Dtype::F8_E5M2, "F8_E5M2", 1}, {Dtype::F8_E4M3, "F8_E4M3", 1},
    {Dtype::I16, "I16", 2},   {Dtype::U16, "U16", 2},   {Dtype::F16, "F16", 2},
    {Dtype::BF16, "BF16", 2}, {Dtype::I32, "I32", 4},   {Dtype::U32, "U32", 4},
    {Dtype::F32, "F32", 4},   {Dtype::F64, "F64", 8},   {Dtype::I64, "I64", 8},
    {Dtype::U64, "U64", 8},
};

const DtypeRow& row(Dtype d) {
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

std::optional<Dtype> dtype_from_string(std::string_view s) {
  for (const auto& r : kDtypes)
    if (s == r.name) return r.dtype;
  return std::nullopt;
}

const char* dtype_name(Dtype d) { return row(d).name; }
size_t dtype_size(Dtype d) { return row(d).size; }
bool dtype_is_convertible(Dtype d) { return d == Dtype::F32 || d == Dtype::BF16 || d == Dtype::F16; }

void convert_elements(Dtype from, const std::byte* src, size_t n, float* dst) {
  if (n == 0) return;  // dst may then be null, which memcpy must not see
  switch (from) {
    case Dtype::F32:
      std::memcpy(dst, src, n * 4);
      return;
    case Dtype::BF16:
      for (size_t i = 0; i < n; ++i) dst[i] = to_float(bf16{load<uint16_t>(src + 2 * i)});
      return;
    case Dtype::F16:
      for (size_t i = 0; i < n; ++i) dst[i] = f16_to_float(load<uint16_t>(src + 2 * i));
      return;
    default:
      MT_CHECK(false, std::string("convert_elements: unsupported dtype ") + dtype_name(from));
  }
}

void convert_elements(Dtype from, const std::byte* src, size_t n, bf16* dst) {
  if (n == 0) return;
  switch (from) {
    case Dtype::F32:
      for (size_t i = 0; i < n; ++i) dst[i] = float_to_bf16(load<float>(src + 4 * i));
      return;
    case Dtype::BF16:
      std::memcpy(dst, src, n * 2);
      return;
    case Dtype::F16:
      for (size_t i = 0; i < n; ++i) dst[i] = float_to_bf16(f16_to_float(load<uint16_t>(src + 2 * i)));
      return;
    default:
      MT_CHECK(false, std::string("convert_elements: unsupported dtype ") + dtype_name(from));
  }
}

}  // namespace mt
