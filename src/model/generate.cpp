#include "model/generate.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "core/error.h"
#include "model/decoder.h"

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

std::vector<int32_t> generate(LlamaModel& model, const std::vector<int32_t>& prompt,
                              const GenerateOptions& opt, const std::function<void(int32_t)>& on_token) {
  if (prompt.empty()) fail("generation needs at least one prompt token (e.g. BOS)");
  if (opt.temperature < 0.0f) fail("temperature must be >= 0");
  if (!(opt.top_p > 0.0f && opt.top_p <= 1.0f)) fail("top_p must be in (0, 1]");
  const int64_t limit = std::min<int64_t>(model.config().max_position_embeddings,
                                          int64_t(prompt.size()) + opt.max_new_tokens);
  if (int64_t(prompt.size()) >= limit + (opt.max_new_tokens == 0 ? 1 : 0) && opt.max_new_tokens > 0)
    fail("prompt of " + std::to_string(prompt.size()) + " tokens leaves no room under max_position_embeddings (" +
         std::to_string(model.config().max_position_embeddings) + ")");
  Decoder dec(model, limit);
  std::mt19937_64 gen(opt.seed);
  const std::vector<float>* logits = nullptr;
  for (int32_t t : prompt) logits = &dec.step(t);
  std::vector<int32_t> out;
  while (int64_t(out.size()) < opt.max_new_tokens) {
    double u = double(gen() >> 11) * (1.0 / 9007199254740992.0);
    int32_t next = pick_token(*logits, opt.temperature, opt.top_p, u);
    if (std::find(opt.stop_ids.begin(), opt.stop_ids.end(), next) != opt.stop_ids.end()) break;
    out.push_back(next);
    if (on_token) on_token(next);
    if (dec.position() >= limit) break;
    logits = &dec.step(next);
  }
  return out;
}

}  // namespace mt
