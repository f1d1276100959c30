// Text pictures of a tensor's layout in the manner of jax.debug.visualize_array_sharding: a grid
// of boxes, rows for the blocks of dim 0, columns for the blocks of dim 1 (a 1-D tensor is one
// row), each box labelled with the ranks that hold that block ("0,4" for two replicas).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "parallel/layout.h"

namespace mt::parallel {

// "0-3,8" style: ascending ranks with consecutive runs collapsed; a long list is shortened to
// "0,8,...,56 (8 ranks)".
std::string rank_list(const std::vector<int64_t>& ranks);

// The box grid, one line per text row, each line starting with `indent`. A grid wider than
// max_width columns is replaced by a one-line summary. Ranks that do not hold the tensor are left
// out: under ep those of the other ep coordinates for an expert's (TensorLayout::held_by), and
// those `holds` (when given) rejects (under pp, the stages that do not hold it).
std::string render_grid(const TensorLayout& t, const std::string& indent = "  ",
                        size_t max_width = 120, const std::function<bool(int64_t)>& holds = nullptr);

}  // namespace mt::parallel
