// The names and shapes of a Transformer's parameters, computed from the config alone (no
// allocation): what the shard command and the memory planner reason about. Mirrors the
// declaration order of Transformer's constructor (base store, then adapter store); a test checks
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
  // An expert's tensor (its weight or adapters): its index among the layer's `experts` (what
  // expert parallelism places it by); -1 for every other tensor.
  int64_t expert = -1, experts = 0;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return n;
  }
};

// Of the config's local experts only (ModelConfig::local_experts: all of them on a whole model).
std::vector<ParamShape> llama_param_shapes(const ModelConfig& config, const LoraConfig& lora);
// mt::Error, one line, when lora.targets names GPT-2's modules (c_attn, c_proj, c_fc) on another
// family's model, or another family's projections (q, ..., down) on GPT-2's.
void check_lora_targets(const ModelConfig& config, const LoraConfig& lora);

// A block's projection matrix (q, k, v, o, gate, up, down, an expert's): what lora.base_dtype = "nf4" stores in
// 4 bits. The embedding, the head and the norms stay as they are (QLoRA quantises the linear
// layers the adapters sit on; the head is small next to them and sensitive).
// An MoE router is kept too (small, and it decides where every token goes).
bool quantized_in_qlora(const ParamShape& p);

}  // namespace mt
