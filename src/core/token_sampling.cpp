#include "core/token_sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace mt {

int32_t pick_token(const std::vector<float>& logits, float temperature, float top_p, double uniform) {
  const int32_t V = int32_t(logits.size());
  if (temperature <= 0.0f)
    return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
  const float mx = *std::max_element(logits.begin(), logits.end());
  std::vector<double> prob(static_cast<size_t>(V));
  double sum = 0.0;
  for (int32_t i = 0; i < V; ++i) sum += prob[size_t(i)] = std::exp(double(logits[size_t(i)] - mx) / temperature);
  std::vector<int32_t> order(static_cast<size_t>(V));
  std::iota(order.begin(), order.end(), 0);
  // Highest probability first; ties by id, so the order (and the pick) is fully determined.
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return prob[size_t(a)] > prob[size_t(b)]; });
  size_t keep = 0;
  double mass = 0.0;
  while (keep < order.size() && (keep == 0 || mass < top_p * sum)) mass += prob[size_t(order[keep++])];
  double target = uniform * mass, acc = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    acc += prob[size_t(order[i])];
    if (target < acc) return order[i];
  }
  return order[keep - 1];
}

}  // namespace mt
