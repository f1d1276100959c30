#include "train/config_docs.h"

#include "train/config_aliases.h"
#include "train/config_values.h"

namespace mt {
namespace {

std::string default_text(const ConfigKey& key) { return config_value_toml(key, RunConfig{}); }

// Strings and arrays in code quotes, numbers and booleans as they are; '|' cannot end a cell.
std::string markdown_value(const std::string& toml) {
  if (toml.empty()) return "";
  std::string out = toml.front() == '"' || toml.front() == '[' ? "`" + toml + "`" : toml;
  std::string escaped;
  for (char ch : out) escaped += ch == '|' ? std::string("\\|") : std::string(1, ch);
  return escaped;
}

std::string markdown_text(const std::string& text) {
  std::string out;
  for (char ch : text) out += ch == '|' ? std::string("\\|") : std::string(1, ch);
  return out;
}

}  // namespace

std::string config_key_description(const ConfigKey& key) {
  const std::string allowed = config_allowed_text(key);
  return std::string(key.help) + (allowed.empty() ? "" : "; " + allowed) +
         (key.per_rank ? "; may differ between ranks" : "");
}

namespace {

// The [section] tables of a run's TOML, in the order of the key table.
std::string config_sections_help() {
  std::string names;
  for (const ConfigKey& key : config_keys()) {
    // Built piecewise: "[" + a temporary string trips g++ 12's false -Wrestrict.
    std::string section = "[";
    section += key.name.substr(0, key.name.find('.'));
    section += "]";
    if (names.find(section) != std::string::npos) continue;
    if (!names.empty()) names += ", ";
    names += section;
  }
  return "Config sections (the tables of a --config TOML file): " + names + ".\n"
         "The table of every key with its type, default and meaning: docs/configuration.md, "
         "or `meshtrain train --print-config-table`.\n\n";
}

}  // namespace

std::string config_keys_help() {
  std::string out = config_sections_help() +
      "Config keys (set with --set section.key=value): each with its default, and the built-in "
      "run's value where it differs\n";
  for (const ConfigKey& key : config_keys()) {
    out += "  " + std::string(key.name) + " = " + default_text(key);
    if (!key.builtin.empty()) out += " (built-in run: " + std::string(key.builtin) + ")";
    out += "\n      " + config_key_description(key) + "\n";
  }
  out += "Aliases (PEFT, HF Trainer and torchtune names, accepted for their keys):\n";
  for (const ConfigAlias& a : config_aliases())
    out += "  " + std::string(a.name) +
           (a.refusal ? " (" + std::string(a.origin) + "; refused, saying what to give instead)"
                      : " -> " + std::string(a.key) + " (" + std::string(a.origin) + ")") + "\n";
  return out;
}

std::string config_keys_markdown() {
  std::string out =
      "| Key | Type | Default | Built-in run | Meaning and constraints |\n"
      "|---|---|---|---|---|\n";
  for (const ConfigKey& key : config_keys())
    out += "| `" + std::string(key.name) + "` | " + config_type_name(key) + " | " +
           markdown_value(default_text(key)) + " | " + markdown_value(std::string(key.builtin)) +
           " | " + markdown_text(config_key_description(key)) + " |\n";
  out += "\nAliases: other tools' names for keys, accepted in a config file, in `--set` and as options of "
         "`train` by their last part (`--learning_rate 1e-4` or `--learning-rate 1e-4` is `--set "
         "train.learning_rate=1e-4`); the run's log names each one used (`config: lora.r -> lora.rank`) and "
         "`run.toml` records the key. An alias given beside its key (or beside another alias of it) is "
         "refused; so are the two marked refused, with the reason and what to give instead.\n\n" +
         config_aliases_markdown();
  return out;
}

}  // namespace mt
