// The element types a tensor can hold. Kernels dispatch on this at run time, so a new storage
// type (a 4-bit quantised base, say) is one more case in the backends, not a new template
// instantiation of the model.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/bf16.h"

namespace mt {

enum class DType : uint8_t { f32, bf16, i32 };

constexpr size_t dtype_size(DType t) { return t == DType::bf16 ? 2 : 4; }
const char* dtype_name(DType t);  // "f32", "bf16", "i32"

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<bf16>() { return DType::bf16; }
template <> constexpr DType dtype_of<int32_t>() { return DType::i32; }

}  // namespace mt
