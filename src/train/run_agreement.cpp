#include "train/run_agreement.h"

#include "core/shape_string.h"
#include "model/param_shapes.h"
#include "parallel/rank_agreement.h"
#include "train/config_schema.h"
#include "train/config_values.h"
#include "train/model_identity.h"

namespace mt {

void require_same_run_config(const RunConfig& cfg, parallel::Comm& world) {
  std::vector<parallel::NamedValue> items;
  for (const ConfigKey& key : config_keys())
    if (!key.per_rank) items.push_back({std::string(key.name), config_value_toml(key, cfg)});
  parallel::require_agreement(world, "the run config (give every rank the same config and --set "
                                     "options; under --mesh auto, which sets mesh.*, the same --cluster, and "
                                     "hosts with as much memory)", items);
}

void require_same_model(const ModelConfig& shape, const LoraConfig& lora, const Tokenizer& tok,
                        parallel::Comm& world) {
  // The architecture and the tokenizer first (what a user recognises), then every tensor it implies.
  std::vector<parallel::NamedValue> items;
  for (auto& [name, value] : model_identity(shape, tok)) items.push_back({name, value});
  for (const ParamShape& p : llama_param_shapes(shape, lora))
    items.push_back({p.name, shape_string(p.shape)});
  parallel::require_agreement(world, "the model and tokenizer (each rank reads model.path itself)",
                              items);
}

}  // namespace mt
