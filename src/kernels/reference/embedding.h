// Reference embedding lookup over a table holding vocabulary rows [row0, row0 + table.rows).
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace mt::ref {

// out[n] = table[tokens[n] - row0], or zeros for a token whose row is not in the table.
void embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& table, int64_t row0);
// dtable[tokens[n] - row0] += dout[n] for the tokens whose row is held, tokens in order.
void embedding_backward(const Tensor& dtable, const Tensor& tokens, const Tensor& dout,
                        int64_t row0);

}  // namespace mt::ref
