// adapter_config.json of a PEFT LoRA directory: the adapter's shape (r, lora_alpha,
// target_modules, use_rslora, modules_to_save = ["gate"]: a mixture of experts' routers trained);
// every PEFT key that would change what the adapter computes in a way meshtrain does not implement
// (use_dora, alpha_pattern, modules_to_save of other modules, ...) is refused at any value but its
// default, naming it. Split from the weight loading (io/pretrained) so that the text can
// be parsed, and fuzzed, on its own. Any malformed file is one mt::Error line naming it.
#pragma once
#include <string>

#include "model/lora_config.h"

namespace mt {

// The JSON text of an adapter_config.json; `source` names it in messages.
LoraConfig parse_peft_config(const std::string& json_text, const std::string& source);
// Reads <adapter_dir>/adapter_config.json.
LoraConfig read_peft_config(const std::string& adapter_dir);

}  // namespace mt
