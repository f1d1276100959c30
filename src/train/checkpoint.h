// Training checkpoints: everything needed to continue a run exactly where it stopped.
//
//   <output.dir>/checkpoints/step-000050/
//     manifest.json          step, sampler state, optimizer step count, the run config (TOML),
//                            the tensor list, and a format version
//     trainable.safetensors  f32 master values of the trainable tensors (all of the model in full
//                            training, the adapters in LoRA runs), under their model names
//     optimizer.safetensors  AdamW moments: <name>.exp_avg and <name>.exp_avg_sq
//   <output.dir>/checkpoints/latest   the newest complete checkpoint's directory name
//
// A checkpoint is written into step-N.tmp/, every file fsynced, then renamed into place and only
// then named in `latest`, so a crash mid-save leaves the previous checkpoint intact and loadable.
// The data-parallel layout does not enter the files: a checkpoint saved under one mesh loads
// under another.
#pragma once
#include <cstdint>
#include <string>

#include "data/text_dataset.h"
#include "model/llama.h"
#include "train/adamw.h"

namespace mt {

struct CheckpointState {
  int64_t step = 0;  // optimizer steps completed
  SamplerState sampler;
};

// Writes the checkpoint for `state.step`; deletes older checkpoints beyond `keep`. Returns its
// directory.
std::string save_checkpoint(const std::string& output_dir, const CheckpointState& state,
                            LlamaModel& model, AdamW& optimizer, const std::string& config_toml,
                            int64_t keep);

// "latest" -> the newest checkpoint of output_dir; anything else is a checkpoint directory.
std::string resolve_checkpoint(const std::string& spec, const std::string& output_dir);

// Restores the trainable values, the optimizer and returns the state to continue from. The model
// must have the same trainable tensors (names and shapes) as the one saved: mt::Error otherwise.
CheckpointState load_checkpoint(const std::string& dir, LlamaModel& model, AdamW& optimizer);

}  // namespace mt
