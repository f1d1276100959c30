// Other tools' names for meshtrain's config keys: PEFT's LoraConfig (r, lora_alpha, lora_dropout,
// target_modules), the HF Trainer's TrainingArguments (num_train_epochs, learning_rate, ...) and
// torchtune's recipes (lora_rank, epochs), so that a user coming from them can write what they
// know. An alias is accepted in a config file and in --set, renamed to its key before anything
// else reads the document (so run.toml records the key), and reported once ("lora.r ->
// lora.rank"). Giving an alias beside its key, or two aliases of one key, is refused: which one
// was meant is not ours to guess. A few names are known only to be refused with the reason (the HF
// Trainer's fp16, per_device_train_batch_size), so that a user learns what to give instead.
#pragma once
#include "core/toml.h"

#include <string>
#include <string_view>
#include <vector>

namespace mt {

struct ConfigAlias {
  std::string_view name;    // "lora.r"
  std::string_view key;     // "lora.rank"
  std::string_view origin;  // "PEFT", "HF Trainer", "torchtune"
  // Where the alias spells its values otherwise than the key (PEFT's module names "q_proj", ...):
  // rewrites the value in place, table[leaf], now under the key's name; refuses what has no
  // meaning here in one line starting with `where`. Null: the value as given.
  void (*translate)(toml::table& table, std::string_view leaf, const std::string& where) = nullptr;
  std::string_view note = "";  // how the values map, for the documentation
  // A name meshtrain cannot honour: why, in one line, for the value given; "" for a value that asks
  // for nothing meshtrain does not do anyway (fp16 = false), which is then dropped. Null: accepted.
  std::string (*refusal)(const toml::node& value) = nullptr;
};

// Every alias, in the order they are documented.
const std::vector<ConfigAlias>& config_aliases();
const ConfigAlias* find_config_alias(std::string_view name);
// The key `name` stands for: the alias's key, or `name` itself (a view of `name`: keep it alive).
std::string_view canonical_config_key(std::string_view name);

// Renames every alias in `doc` to its key (translating its value), appending "alias -> key" to
// `renamed` for each; refuses an alias given beside its key or beside another alias of the same
// key, naming both and `where`.
void rename_config_aliases(toml::table& doc, const std::string& where, std::vector<std::string>& renamed);

// lora.targets (table[leaf]) given in PEFT's module names (q_proj, ..., or "all-linear") rewritten in
// meshtrain's (q, ...), as lora.target_modules takes them; rename_config_aliases does it for a document.
void spell_lora_targets(toml::table& table, std::string_view leaf);

// The Markdown table of aliases (under the key table in docs/configuration.md).
std::string config_aliases_markdown();

}  // namespace mt
