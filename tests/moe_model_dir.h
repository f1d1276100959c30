// A tiny mixture-of-experts model in its family's HF layout (family_model_dir.h), for the tests
// that train one from model.path: the built-in run's model with 4 experts, 2 a token (Mixtral's
// intermediate_size wide, the others' 64: OLMoE's intermediate_size, which its experts take),
// renormalised for Mixtral only, Qwen3-MoE's q/k norms (per head) and OLMoE's (over the whole
// projections).
#pragma once
#include <functional>
#include <string>

#include "family_model_dir.h"

namespace mt::testing {

// `more` changes the config further (dense layers, the routing losses); `values` the weights
// (model/weights as family_model_dir's). Returns the directory.
inline std::string moe_model_dir(const std::string& family, const std::string& tag,
                                 const std::function<void(ModelConfig&)>& more = {},
                                 const std::function<void(Transformer&)>& values = {}) {
  return family_model_dir(
      tag, "--set train.seq_len=32 --set train.batch_size=2",
      [&](ModelConfig& c) {
        c.model_type = family;
        c.num_experts = 4, c.num_experts_per_tok = 2;
        c.moe_intermediate_size = family == "mixtral" ? c.intermediate_size : 64;
        c.norm_topk_prob = family == "mixtral";
        if (family == "qwen3_moe") c.qk_norm = true;
        if (family == "olmoe") {  // its experts are intermediate_size wide (hf_moe.cpp)
          c.intermediate_size = 64;
          c.qk_norm = c.qk_norm_whole = true;  // over the whole projections
        }
        if (more) more(c);
      },
      /*seed=*/5, values);
}

}  // namespace mt::testing
