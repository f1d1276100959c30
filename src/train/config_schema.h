// The run config's keys, each declared once (config_schema.cpp): its name with its section, the
// RunConfig field it fills (whose C++ type is the key's type), the values it allows, the built-in
// run's value where that differs from the default, and one line of help.
//
// Why a table: the TOML reader, the per-key checks, the built-in default TOML (configs/tiny.toml),
// to_toml (each run's run.toml), `meshtrain train --help` and docs/configuration.md's key table are all
// derived from it, so a key cannot be added to one of them and forgotten in another. Before, each
// key was written in five places, and run.toml had lost [mesh] pp and the partition rules.
//
// A key's default is its field's initial value in RunConfig{}: those structs are also built
// directly by code and tests, so their member initialisers stay the one place a default is written,
// and the table reads it through `field`.
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "train/run_config.h"

namespace mt {

using ConfigField =
    std::variant<int64_t*, uint64_t*, float*, bool*, std::string*, std::vector<std::string>*,
                 Precision*, parallel::PartitionRules*, std::vector<DataSource>*>;

// Bounds for a number (NaN is never allowed). "open" excludes the bound itself.
struct ValueRange {
  double min = -std::numeric_limits<double>::infinity();
  bool min_open = false;
  double max = std::numeric_limits<double>::infinity();
  bool max_open = false;
};

struct ConfigKey {
  std::string_view name;               // "section.key", or "section.table.key"
  ConfigField (*field)(RunConfig&);    // where the value lives
  ValueRange range = {};               // numbers
  std::vector<std::string_view> choices = {};  // strings: the allowed values; lists: the allowed entries
  bool non_empty = false;              // strings
  std::string_view builtin = "";       // the built-in run's value as TOML, where it differs
  std::string_view help = "";          // one line; cross-key rules are stated here, checked in run_config.cpp
  // The ranks of a job may be given different values (it describes the rank's own host and
  // changes nothing any other rank computes); every other key must be the same on every rank.
  bool per_rank = false;
};

// Every key, in the order they are documented and written.
const std::vector<ConfigKey>& config_keys();
const ConfigKey* find_config_key(std::string_view name);

// The table a key lives in: "model" for model.path, "model.rope_scaling" for its factor.
std::string_view table_of(const ConfigKey& key);
// The key's name inside its table: "factor" for model.rope_scaling.factor.
std::string_view leaf_of(const ConfigKey& key);
// The tables, outer before inner, in order of first appearance ("model", "model.rope_scaling", ...).
const std::vector<std::string>& config_tables();
bool is_config_table(std::string_view path);

// A key's field in `c` (const: the accessor only takes an address).
ConfigField field_of(const ConfigKey& key, RunConfig& c);
ConfigField field_of(const ConfigKey& key, const RunConfig& c);

}  // namespace mt
