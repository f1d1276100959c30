#include "core/did_you_mean.h"

#include <algorithm>

namespace mt {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string_view closest_name(std::string_view name, const std::vector<std::string_view>& candidates) {
  std::string_view best;
  size_t best_score = 0;
  for (std::string_view c : candidates) {
    const size_t longer = std::max(name.size(), c.size()), shorter = std::min(name.size(), c.size());
    const size_t allowed = std::max<size_t>(2, longer / 3);
    // The distance is at least the difference in length: only close lengths are compared.
    size_t score = longer - shorter <= allowed ? edit_distance(name, c) : allowed + 1;
    // One name cut short of the other ("optim" for "optimizer"): a likely meaning, ranked last.
    const bool cut_short = shorter >= 4 && (name.starts_with(c) || c.starts_with(name));
    if (score > allowed && !cut_short) continue;
    score = std::min(score, allowed + 1);
    if (best.empty() || score < best_score) best_score = score, best = c;
  }
  return best;
}

std::string did_you_mean(std::string_view name, const std::vector<std::string_view>& candidates) {
  const std::string_view best = closest_name(name, candidates);
  return best.empty() ? "" : " (did you mean '" + std::string(best) + "'?)";
}

}  // namespace mt
