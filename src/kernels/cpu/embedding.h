// Token embedding lookup. The table is the f32 master copy (a gather gains nothing from bf16);
// the output is the f32 residual stream.
#pragma once
#include <cstdint>

namespace mt {

// out[n, :] = table[tokens[n], :]            tokens: [N], table: [V, C], out: [N, C]
void embedding_forward(float* out, const int32_t* tokens, const float* table, int64_t N, int64_t C);
// dtable[tokens[n], :] += dout[n, :]         deterministic (no atomics, fixed order)
void embedding_backward(float* dtable, const int32_t* tokens, const float* dout, int64_t N,
                        int64_t C);

}  // namespace mt
