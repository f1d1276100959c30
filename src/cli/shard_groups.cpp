#include "cli/shard_groups.h"

#include <map>
#include <regex>

#include "core/shape_string.h"

namespace mt::cli {

std::vector<TensorGroup> group_tensors(const std::vector<parallel::ShardedParam>& params, bool all,
                                       const std::function<std::string(const std::string&)>& suffix) {
  static const std::regex layer_re(R"(layers\.\d+\.)"), expert_re(R"(experts\.\d+\.)");
  std::vector<TensorGroup> groups;
  std::map<std::string, size_t> index;
  for (const auto& p : params) {
    std::string label = p.param.name;
    // An expert's index is wildcarded only where ParamShape marks it one (a name alone could be
    // any family's), so the count below is of experts, not of look-alike names.
    if (!all) {
      label = std::regex_replace(label, layer_re, "layers.*.");
      if (p.param.expert >= 0) label = std::regex_replace(label, expert_re, "experts.*.");
    }
    if (suffix) label += suffix(p.param.name);
    const std::string key = label + shape_string(p.param.shape) + p.layout.spec.str();
    auto [it, added] = index.emplace(key, groups.size());
    if (added) groups.push_back({&p, label, 0, {}});
    TensorGroup& g = groups[it->second];
    ++g.count;
    if (p.param.expert >= 0) g.experts.insert(p.param.expert);
  }
  return groups;
}

std::string ep_ranges(int64_t experts, int64_t ep) {
  const int64_t per = experts / ep;
  auto one = [&](int64_t c) {
    const int64_t a = c * per, b = a + per - 1;
    return "ep " + std::to_string(c) + ": expert" + (a == b ? " " + std::to_string(a)
                                                             : "s " + std::to_string(a) + "-" + std::to_string(b));
  };
  std::string s;
  for (int64_t c = 0; c < ep; ++c) {
    if (ep > 8 && c == 2) {
      s += ", ...";
      c = ep - 1;
    }
    s += (s.empty() ? "" : ", ") + one(c);
  }
  return s;
}

}  // namespace mt::cli
