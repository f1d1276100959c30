// The tensors a weights file holds, checked against the model a config describes from the
// file's headers alone, before anything is allocated or read: a config.json whose sizes disagree
// with its weights (3 layers against 5 in the file, a width of 10^12) is refused in a moment
// instead of sizing the whole model from it first.
#pragma once
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/lora_config.h"

namespace mt {

// What a file holds: its tensor names, and the shape of a name (nullopt when it has no such tensor).
struct HeldTensors {
  std::vector<std::string> names;
  std::function<std::optional<std::vector<int64_t>>(const std::string& name)> shape;
};

// mt::Error, one line starting with `where`, unless the file holds every tensor of the model with
// the config's shape: the base tensors (adapters = false) or the LoRA adapters of `lora`
// (adapters = true), each under `prefix` + its name. The layer count is compared first (the
// highest "model.layers.N." in the file against num_hidden_layers), so a config of 10^9 layers
// costs nothing to refuse. Tensors the model does not use (rotary inv_freq, say) are allowed.
// A PEFT adapter's tensors beyond those `read` (DoRA's magnitude, an embedding's LoRA, a bias, a
// module saved in full, an untargeted module's adapter): the first is refused, naming it and what
// it is. check_held_shapes applies it to a PEFT adapter (prefix "base_model.model.").
void refuse_unread_adapter_tensors(const HeldTensors& held, const std::set<std::string>& read,
                                   const std::string& where);
void check_held_shapes(const ModelConfig& config, const LoraConfig& lora, bool adapters,
                       const HeldTensors& held, const std::string& prefix, const std::string& where);

}  // namespace mt
