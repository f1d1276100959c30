// The element types a tensor can hold. Kernels dispatch on this at run time, so a new storage
// type (a 4-bit quantised base, say) is one more case in the backends, not a new template
// instantiation of the model.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/bf16.h"

namespace mt {

// nf4: a frozen base quantised to 4-bit NormalFloat (core/nf4.h). It is packed in per-row records,
// so it has no size per element: Tensor::bytes() counts it, and only whole rows can be sliced.
enum class DType : uint8_t { f32, bf16, i32, nf4 };

constexpr bool is_packed(DType t) { return t == DType::nf4; }
// Bytes per element of an unpacked type (0 for a packed one).
constexpr size_t dtype_size(DType t) { return t == DType::bf16 ? 2 : t == DType::nf4 ? 0 : 4; }
const char* dtype_name(DType t);  // "f32", "bf16", "i32", "nf4"

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<bf16>() { return DType::bf16; }
template <> constexpr DType dtype_of<int32_t>() { return DType::i32; }

}  // namespace mt
