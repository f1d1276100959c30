#include "io/weight_shapes.h"

#include <algorithm>
#include <cstdlib>
#include <set>

#include "core/clipped.h"
#include "core/error.h"
#include "core/shape_string.h"
#include "io/peft_names.h"
#include "model/transformer.h"
#include "model/param_shapes.h"

namespace mt {

namespace {

// One more than the highest N of a "<prefix>model.layers.N." name; 0 when there is none.
int64_t layers_in(const std::vector<std::string>& names, const std::string& prefix) {
  const std::string layers = prefix + "model.layers.";
  int64_t count = 0;
  for (const auto& name : names) {
    if (name.compare(0, layers.size(), layers) != 0) continue;
    const char* digits = name.c_str() + layers.size();
    char* end = nullptr;
    const long long n = std::strtoll(digits, &end, 10);
    if (end != digits && *end == '.' && n >= 0) count = std::max<int64_t>(count, n + 1);
  }
  return count;
}

}  // namespace

namespace {

void refuse_unread_adapter_tensor(const std::string& name, const std::string& where) {
  const auto has = [&](const char* part) { return name.find(part) != std::string::npos; };
  const char* meaning = has("lora_magnitude_vector")                        ? "DoRA's magnitude"
                        : has("lora_embedding_A") || has("lora_embedding_B") ? "LoRA on an embedding"
                        : has(".lora_") && has(".bias")                       ? "a trained bias on an adapter"
                        : has(".lora_")                                      ? "an adapter on a module the config does not target"
                                                                             : "a module trained in full (modules_to_save)";
  fail(where + ": tensor '" + clipped(name) + "' (" + meaning +
       ") is not one meshtrain reads, so the adapter would compute otherwise than PEFT's; meshtrain reads "
       "LoRA A and B on the targeted modules and a mixture of experts' routers");
}

}  // namespace

void refuse_unread_adapter_tensors(const HeldTensors& held, const std::set<std::string>& read,
                                   const std::string& where) {
  for (const std::string& name : held.names)
    if (!read.count(name)) refuse_unread_adapter_tensor(name, where);
}

void check_held_shapes(const ModelConfig& config, const LoraConfig& lora, bool adapters,
                       const HeldTensors& held, const std::string& prefix, const std::string& where) {
  config.validate();
  // Adapters live in the layers unless they target only the head.
  const auto mask = lora_targets_mask(lora);
  const bool layered = !adapters || std::find(mask.begin(), mask.end(), true) != mask.end();
  if (layered) {
    const int64_t found = layers_in(held.names, prefix);
    if (found != config.num_hidden_layers)
      fail(where + ": the weights hold " + std::to_string(found) +
           " layers, the config gives num_hidden_layers = " + std::to_string(config.num_hidden_layers));
  }
  std::set<std::string> expected;
  for (const ParamShape& p : llama_param_shapes(config, lora)) {
    if (p.adapter != adapters) continue;
    const std::string name = file_tensor_name(prefix, p.name);
    expected.insert(name);
    const auto shape = held.shape(name);
    if (!shape) fail(where + ": missing tensor '" + name + "'");
    if (*shape != p.shape)
      fail(where + ": tensor '" + name + "' has shape " + shape_string(*shape) + ", the config gives " +
           shape_string(p.shape));
  }
  // A tied head's copy, saved beside the embedding's with the same values (io/peft.cpp): PEFT
  // reads it, meshtrain's tied head is the embedding's copy.
  if (adapters && prefix == kPeftPrefix && lora.train_embeddings && config.tie_word_embeddings) {
    const std::string head = file_tensor_name(prefix, kHeadCopyName);
    if (held.shape(head)) expected.insert(head);
  }
  // A PEFT adapter's every tensor changes what it computes: one meshtrain would not read is refused.
  if (adapters && prefix == kPeftPrefix) refuse_unread_adapter_tensors(held, expected, where);
}

}  // namespace mt
