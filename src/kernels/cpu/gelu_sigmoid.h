// The tanh GeLU of kernels/device_math/gelu_element.h, written with a sigmoid so the CPU loops
// vectorise. libm's tanhf has no vector variant: called per element it took 23% of a bf16 GPT-2
// 124M step (docs/benchmarks.md). With u = k (x + c x^3) and s = sigmoid(2u) = 1 / (1 + e^-2u),
//   (1 + tanh u) / 2 = s,   so   gelu(x) = x s,
//   gelu'(x) = s + 2 k x (1 + 3 c x^2) s (1 - s),   1 - s = e^-2u s,
// where e^-2u is fast_exp, which the kernels run eight lanes at a time (fast_exp_block.h).
// Neither s nor 1 - s is a difference of nearly equal numbers (tanh u - 1 would be, for negative
// x), so both keep their relative accuracy.
// Error against the same formula in double, over every 31st float in [-10, 10] (measured
// 2026-12-03; OpsGelu.SigmoidFormWithinStatedError checks it on a sample): gelu within 1.4e-5
// relative wherever it is a normal float (the worst at x = -9.9, gelu = -2e-36, where the
// rounding of u in float is amplified by e^-2u), gelu' within 2.1e-7 x max(1, |gelu'|). tanhf in
// the (1 + tanh u) form returns 0 for gelu below x = -5.5 (relative error 1) and gelu' within 5.6e-7.
// The GPU keeps tanhf (a fast intrinsic there); both compute the same function.
#pragma once
#include "kernels/cpu/fast_exp.h"
#include "kernels/device_math/gelu_element.h"

namespace mt {

struct GeluSigmoid {
  float s;           // sigmoid(2u) = (1 + tanh u) / 2
  float one_minus_s; // 1 - s, computed without cancellation
};

// The pieces of gelu_sigmoid, for kernels that run the exp over a block (fast_exp_block.h):
// gelu_sigmoid(x) is gelu_sigmoid_from_exp(fast_exp(gelu_exp_argument(x))), bit for bit.
inline float gelu_exp_argument(float x) {  // -2u
  const float u = dm::kGeluTanhK * (x + dm::kGeluTanhC * x * x * x);
  return -2.0f * u;
}
inline GeluSigmoid gelu_sigmoid_from_exp(float e) {  // e = e^-2u
  const float s = 1.0f / (1.0f + e);
  return {s, e * s};
}
inline GeluSigmoid gelu_sigmoid(float x) {
  return gelu_sigmoid_from_exp(fast_exp(gelu_exp_argument(x)));
}

inline float gelu_tanh_vectorisable(float x) { return x * gelu_sigmoid(x).s; }

// gelu'(x), given x's gelu_sigmoid (GeGLU's backward needs both gelu and gelu').
// g by value: a reference takes its address, and inside an `omp simd` loop g++ then keeps it in
// memory and does not vectorise the loop.
inline float gelu_tanh_derivative_vectorisable(float x, GeluSigmoid g) {
  const float du_dx = dm::kGeluTanhK * (1.0f + 3.0f * dm::kGeluTanhC * x * x);
  return g.s + 2.0f * x * du_dx * g.s * g.one_minus_s;
}

inline float gelu_tanh_derivative_vectorisable(float x) {
  return gelu_tanh_derivative_vectorisable(x, gelu_sigmoid(x));
}

}  // namespace mt
