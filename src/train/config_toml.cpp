// RunConfig -> TOML, generated from the key table: the built-in default run (configs/tiny.toml is
// this text) and each run's run.toml (every key, so that `meshtrain train --config run.toml`
// repeats the run).
#include <functional>
#include <optional>

#include "train/config_docs.h"
#include "train/config_schema.h"
#include "train/config_values.h"
#include "train/run_config.h"

namespace mt {
namespace {

using ValueOf = std::function<std::optional<std::string>(const ConfigKey&)>;

// One [table] per schema table, outer before inner, each key as `leaf = value` (after its help
// as a comment when asked); keys whose value_of is empty are left out, and so are empty tables.
std::string write_document(const ValueOf& value_of, bool with_help) {
  std::string out;
  for (const std::string& table : config_tables()) {
    std::string body;
    for (const ConfigKey& key : config_keys()) {
      if (table_of(key) != table) continue;
      const std::optional<std::string> value = value_of(key);
      if (!value) continue;
      if (with_help) body += "# " + config_key_description(key) + "\n";
      body += std::string(leaf_of(key)) + " = " + *value + "\n";
    }
    if (body.empty()) continue;
    if (!out.empty()) out += "\n";
    out += "[" + table + "]\n";
    out += body;
  }
  return out;
}

}  // namespace

std::string default_run_config_toml() {
  return "# meshtrain built-in default run: a small LLaMA trained from scratch on the built-in text\n"
         "# with the byte-level tokenizer. About a minute on two cores.\n"
         "# Generated from src/train/config_schema.cpp (meshtrain train --print-default-config).\n"
         "\n" +
         write_document(
             [](const ConfigKey& key) -> std::optional<std::string> {
               if (!key.builtin.empty()) return std::string(key.builtin);
               return config_value_toml(key, RunConfig{});
             },
             /*with_help=*/true);
}

std::string to_toml(const RunConfig& cfg) {
  return "# meshtrain run config, complete: meshtrain train --config run.toml repeats the run.\n\n" +
         write_document(
             [&](const ConfigKey& key) -> std::optional<std::string> {
               // A model to start from brings its own architecture; other [model] keys are refused.
               const std::string_view table = table_of(key);
               const bool model_key = (table == "model" || table.starts_with("model.")) &&
                                      key.name != "model.path";
               if (model_key && !cfg.model_path.empty()) return std::nullopt;
               // A run by epochs has its steps from the data: the two together are refused.
               if (key.name == "train.steps" && cfg.train.epochs > 0) return std::nullopt;
               // Likewise a warm-up given as a share of the steps has no steps of its own.
               if (key.name == "optim.warmup_steps" && cfg.optim.warmup_ratio > 0) return std::nullopt;
               return config_value_toml(key, cfg);
             },
             /*with_help=*/false);
}

}  // namespace mt
