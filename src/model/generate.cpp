#include "model/generate.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "core/error.h"
#include "core/token_sampling.h"
#include "model/decoder.h"

namespace mt {

void validate_sampling(const GenerateOptions& opt) {
  // Written as "must hold" tests: NaN fails every comparison, so "temperature < 0" would let it in.
  if (!(std::isfinite(opt.temperature) && opt.temperature >= 0.0f))
    fail("temperature must be a finite number >= 0 (got " + std::to_string(opt.temperature) + ")");
  if (!(opt.top_p > 0.0f && opt.top_p <= 1.0f))
    fail("top_p must be in (0, 1] (got " + std::to_string(opt.top_p) + ")");
}

std::vector<int32_t> generate(Transformer& model, const std::vector<int32_t>& prompt,
                              const GenerateOptions& opt, const std::function<void(int32_t)>& on_token,
                              int32_t* stopped_by) {
  if (stopped_by) *stopped_by = -1;
  if (prompt.empty()) fail("generation needs at least one prompt token (e.g. BOS)");
  validate_sampling(opt);
  if (opt.max_new_tokens < 0) fail("max_new_tokens must be >= 0, got " + std::to_string(opt.max_new_tokens));
  // Compared, not added: a huge max_new_tokens (INT64_MAX) must mean "until the context is full",
  // where the sum wrapped negative and read as a prompt with no room left.
  const int64_t room = model.config().max_position_embeddings - int64_t(prompt.size());
  const int64_t limit = opt.max_new_tokens >= room ? model.config().max_position_embeddings
                                                   : int64_t(prompt.size()) + opt.max_new_tokens;
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
    if (std::find(opt.stop_ids.begin(), opt.stop_ids.end(), next) != opt.stop_ids.end()) {
      if (stopped_by) *stopped_by = next;
      break;
    }
    out.push_back(next);
    if (on_token) on_token(next);
    if (dec.position() >= limit) break;
    logits = &dec.step(next);
  }
  return out;
}

}  // namespace mt
