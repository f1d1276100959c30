// IEEE binary16 ("half") storage conversions. GGUF's F16 tensors need them; the compiler's
// _Float16 is not relied on so that the rounding is explicit and the same on every target.
#pragma once
#include <cstdint>

namespace mt {

// Round to nearest, ties to even; overflow goes to infinity, NaN stays a (quiet) NaN, and values
// below the normal range become subnormals (or zero) with the same rounding.
uint16_t float_to_f16(float f);
float f16_to_float(uint16_t h);  // exact

}  // namespace mt
