// The names and shapes of a LlamaModel's parameters, computed from the config alone (no
// allocation): what the shard command and the memory planner reason about. Mirrors the
// declaration order of LlamaModel's constructor (base store, then adapter store); a test checks
// it against a real model.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/lora_config.h"

namespace mt {

struct ParamShape {
  std::string name;
  std::vector<int64_t> shape;
  bool adapter = false;  // a LoRA adapter (trainable) rather than a base tensor
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return n;
  }
};

std::vector<ParamShape> llama_param_shapes(const LlamaConfig& config, const LoraConfig& lora);

}  // namespace mt
