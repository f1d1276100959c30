#include "train/run_agreement.h"

#include <cstdio>

#include "core/shape_string.h"
#include "model/param_shapes.h"
#include "parallel/rank_agreement.h"
#include "train/config_schema.h"
#include "train/config_values.h"

namespace mt {

void require_same_run_config(const RunConfig& cfg, parallel::Comm& world) {
  std::vector<parallel::NamedValue> items;
  for (const ConfigKey& key : config_keys())
    if (!key.per_rank) items.push_back({std::string(key.name), config_value_toml(key, cfg)});
  parallel::require_agreement(world, "the run config (give every rank the same config and --set "
                                     "options; under --mesh auto, which sets mesh.*, the same --cluster, and "
                                     "hosts with as much memory)", items);
}

namespace {

// Exactly (all nine significant digits of a float), so that equal texts mean equal values.
std::string exact(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", double(v));
  return buf;
}

}  // namespace

void require_same_model(const ModelConfig& shape, const LoraConfig& lora, const Tokenizer& tok,
                        parallel::Comm& world) {
  const RopeScaling& rs = shape.rope_scaling;
  // The architecture first (what a user recognises), then every tensor it implies.
  std::vector<parallel::NamedValue> items = {
      {"hidden_size", std::to_string(shape.hidden_size)},
      {"intermediate_size", std::to_string(shape.intermediate_size)},
      {"num_hidden_layers", std::to_string(shape.num_hidden_layers)},
      {"num_attention_heads", std::to_string(shape.num_attention_heads)},
      {"num_key_value_heads", std::to_string(shape.num_key_value_heads)},
      {"head_dim", std::to_string(shape.head_dim())},
      {"vocab_size", std::to_string(shape.vocab_size)},
      {"max_position_embeddings", std::to_string(shape.max_position_embeddings)},
      {"rms_norm_eps", exact(shape.rms_norm_eps)},
      {"rope_theta", exact(shape.rope_theta)},
      {"rope_scaling", exact(rs.factor) + ", " + exact(rs.low_freq_factor) + ", " +
                           exact(rs.high_freq_factor) + ", " +
                           std::to_string(rs.original_max_position_embeddings)},
      {"tie_word_embeddings", shape.tie_word_embeddings ? "true" : "false"},
      {"tokenizer", std::string(tok.kind()) + ", " + std::to_string(tok.vocab_size()) + " tokens"},
  };
  for (const ParamShape& p : llama_param_shapes(shape, lora))
    items.push_back({p.name, shape_string(p.shape)});
  parallel::require_agreement(world, "the model's shapes (each rank reads model.path itself)",
                              items);
}

}  // namespace mt
