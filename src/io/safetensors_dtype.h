// The element types a safetensors header may name, and conversion of the three floating types
// meshtrain trains with (F32, BF16, F16) to float or bf16. The other types are recognised so a
// header that lists them (e.g. an I64 position-id buffer) still opens; only reading them fails.
#pragma once
#include <cstddef>
#include <optional>
#include <string_view>

#include "core/bf16.h"

namespace mt {

enum class FileDtype { BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64 };

// The header spelling ("F32", "BF16", ...), or nullopt for a string the format does not define.
std::optional<FileDtype> dtype_from_string(std::string_view s);
const char* dtype_name(FileDtype d);
size_t dtype_size(FileDtype d);  // bytes per element
bool dtype_is_convertible(FileDtype d);  // F32, BF16 or F16: the ones read_f32 / read_bf16 accept

// Convert n little-endian elements of type `from` starting at src (any alignment) to dst.
// `from` must be convertible. F32 -> bf16 rounds to nearest even; everything else is exact.
void convert_elements(FileDtype from, const std::byte* src, size_t n, float* dst);
void convert_elements(FileDtype from, const std::byte* src, size_t n, bf16* dst);

}  // namespace mt
