// A training checkpoint, saved under any mesh, written out as what the end of a run writes: an HF
// model directory (config.json, model.safetensors, tokenizer files) for full training, a PEFT
// adapter directory for LoRA. For the run that died at step 5000 of 10000: its last checkpoint
// becomes a usable model without resuming. One process reads the shard files tensor by tensor,
// so the whole model is never in memory at once.
#pragma once
#include <string>
#include <vector>

namespace mt {

// Returns the files written. mt::Error (one line) for a directory that is not a complete
// checkpoint.
std::vector<std::string> export_checkpoint(const std::string& checkpoint_dir, const std::string& out_dir);

}  // namespace mt
