// Token embedding lookup. The table is the f32 master copy of a trained embedding, or the bf16
// copy of a frozen one (LoRA under bf16 keeps no other); the output is the f32 residual stream.
#pragma once
#include <cstdint>

#include "core/bf16.h"

namespace mt {

// out[n, :] = table[tokens[n], :]            tokens: [N], table: [V, C], out: [N, C]
void embedding_forward(float* out, const int32_t* tokens, const float* table, int64_t N, int64_t C);
// dtable[tokens[n], :] += dout[n, :]         deterministic (no atomics, fixed order)
void embedding_backward(float* dtable, const int32_t* tokens, const float* dout, int64_t N,
                        int64_t C);

// Vocabulary-parallel versions: the table holds rows [row0, row0 + rows) of the vocabulary only.
// Forward writes zeros for tokens outside it (the ranks' outputs then sum to the lookup);
// backward accumulates only the rows held.
void embedding_forward_rows(float* out, const int32_t* tokens, const float* table, int64_t N,
                            int64_t C, int64_t row0, int64_t rows);
// The same from a bf16 table (a frozen embedding's only copy under bf16), widened exactly.
void embedding_forward_rows(float* out, const int32_t* tokens, const bf16* table, int64_t N,
                            int64_t C, int64_t row0, int64_t rows);
void embedding_backward_rows(float* dtable, const int32_t* tokens, const float* dout, int64_t N,
                             int64_t C, int64_t row0, int64_t rows);

}  // namespace mt
