// How `meshtrain shard` lists a model's tensors: one entry per pattern rather than per tensor, so
// that a 94-layer model with 128 experts a layer stays a page long. A tensor's layer index and an
// expert's index are wildcarded ("layers.*.mlp.experts.*.up_proj.weight x 128 experts x 48
// layers"); tensors fall in one group when their pattern, shape, spec and (under pp) stages agree.
#pragma once
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "parallel/shard_plan.h"

namespace mt::cli {

struct TensorGroup {
  const parallel::ShardedParam* first = nullptr;  // its first tensor (layer 0's, expert 0's)
  std::string label;                              // the pattern, with `suffix` appended
  int64_t count = 0;                              // tensors in the group
  std::set<int64_t> experts;                      // expert indices among them (none: not an expert's)
  int64_t layers() const { return experts.empty() ? count : count / int64_t(experts.size()); }
};

// Groups in the order of their first tensor. `all`: one group per tensor (no wildcards).
// `suffix(name)` is appended to each label (under pp, the stages holding it; may be null).
std::vector<TensorGroup> group_tensors(const std::vector<parallel::ShardedParam>& params, bool all,
                                       const std::function<std::string(const std::string&)>& suffix);

// The contiguous expert ranges of `experts` over `ep` ranks, as parallel::expert_owner places them:
// "ep 0: experts 0-1, ep 1: experts 2-3, ..." (more than 8 ep ranks: the first two, "...", the last).
std::string ep_ranges(int64_t experts, int64_t ep);

}  // namespace mt::cli
