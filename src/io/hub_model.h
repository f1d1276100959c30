// A model named by its Hugging Face Hub id (ORG/NAME), turned into the local directory meshtrain
// reads: the snapshot in huggingface_hub's cache (io/hub_cache.h) when it is there, else downloaded
// into that cache first (io/hub_download.h), unless HF_HUB_OFFLINE is set. Every verb that takes a
// model resolves it here, once, before anything reads it.
#pragma once
#include <string>

namespace mt::hub {

// What the caller reads of the model.
enum class HubFiles {
  model,        // everything meshtrain loads: config, tokenizer, safetensors weights
  config_only,  // config.json alone (the planner: a model's shape, not its weights)
};

// `model` unchanged when it is a path that exists or is no Hub id; else the snapshot directory of
// the id at `revision` (empty: "main"). A `revision` with a local path is an error.
std::string resolve_model_path(const std::string& model, const std::string& revision,
                               HubFiles files = HubFiles::model);

}  // namespace mt::hub
