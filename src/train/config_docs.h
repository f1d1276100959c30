// The run-config keys described for people, all generated from the key table (config_schema.h):
// the help under `meshtrain train --help` and docs/configuration.md's table of keys.
#pragma once
#include <string>

#include "train/config_schema.h"

namespace mt {

// The key's help with what it allows: "Optimizer steps; > 0".
std::string config_key_description(const ConfigKey& key);

// Every key with its default (and the built-in run's value where it differs) and its description,
// for `meshtrain train --help`.
std::string config_keys_help();

// docs/configuration.md's Markdown table of keys (what sits between its config-keys markers); print it
// with `meshtrain train --print-config-table`, or update the file with scripts/update_config_docs.sh.
std::string config_keys_markdown();

}  // namespace mt
