// One config key's value in and out, by the type of its field: read from a TOML node (type errors
// name the key), checked against the key's range or choices, and written back as TOML text that
// reads back to the same value.
#pragma once
#include "core/toml.h"

#include <string>

#include "train/config_schema.h"

namespace mt {

// Stores the node's value in the key's field of `c`; throws "<where>: <key> must be ..." on a
// value of the wrong type (or a rule list parallel/partition.h refuses).
void read_config_value(const toml::node& node, const ConfigKey& key, RunConfig& c,
                       const std::string& where);

// The problem with the key's value in `c` ("lora.rank must be > 0, got 0"), or "" when none.
std::string check_config_value(const ConfigKey& key, const RunConfig& c);

// The key's value in `c` as TOML.
std::string config_value_toml(const ConfigKey& key, const RunConfig& c);

// "an integer", "a string", ...: what a TOML value is, for error messages.
const char* toml_type_name(const toml::node& node);

// For documentation: the key's type ("int", "float", "array of strings", ...) and what it allows
// ("> 0", "in [0, 1)", "\"fp32\" or \"bf16\"", ...; "" when anything of its type goes).
std::string config_type_name(const ConfigKey& key);
std::string config_allowed_text(const ConfigKey& key);
// True for keys whose --set value is always taken as the raw text (it is a string).
bool is_string_key(const ConfigKey& key);

}  // namespace mt
