// Text generation over a Decoder: greedy, or temperature with nucleus (top-p) sampling, stopping
// at an end token or a length limit.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "core/token_sampling.h"  // pick_token
#include "model/transformer.h"

namespace mt {

struct GenerateOptions {
  int64_t max_new_tokens = 256;
  float temperature = 0.0f;  // 0: greedy (argmax, lowest id on ties)
  float top_p = 1.0f;        // nucleus: sample from the smallest set of tokens with mass >= top_p
  uint64_t seed = 0;
  std::vector<int32_t> stop_ids;  // generation ends when one of these is produced (not emitted)
};

// mt::Error naming the option when temperature or top_p cannot be sampled with: a negative,
// NaN or infinite temperature, a top_p outside (0, 1]. Called by generate(); callers that print
// before generating (the CLI) call it first so bad options fail before any output.
void validate_sampling(const GenerateOptions& opt);

// Runs the prompt through the model, then produces up to max_new_tokens tokens. `on_token` (may
// be empty) is called with each new token as it is produced. Returns the new tokens; `stopped_by`
// (may be null) is set to the stop id that ended generation, or -1 when the length did.
std::vector<int32_t> generate(Transformer& model, const std::vector<int32_t>& prompt,
                              const GenerateOptions& opt,
                              const std::function<void(int32_t)>& on_token = {}, int32_t* stopped_by = nullptr);

}  // namespace mt
