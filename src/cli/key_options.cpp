#include "cli/key_options.h"

#include <algorithm>

#include "core/did_you_mean.h"
#include "core/error.h"
#include "train/config_aliases.h"

namespace mt::cli {
namespace {

struct KeyShortcut {
  const char* flag;
  const char* key;
  const char* what;
};
constexpr KeyShortcut kKeyShortcuts[] = {
    {"--steps", "train.steps", "optimizer steps"},
    {"--epochs", "train.epochs", "passes over the training data instead of steps"},
    {"--lr", "optim.lr", "peak learning rate"},
    {"--batch-size", "train.batch_size", "sequences per micro-batch"},
    {"--seq-len", "train.seq_len", "tokens per sequence"},
    {"--method", "train.method", "sft, or preference training on chosen / rejected pairs: dpo, ipo, simpo, orpo"},
    {"--beta", "preference.beta", "preference training's beta"},
    {"--seed", "train.seed", "seeds initialisation and batch sampling (the HF Trainer's --seed)"},
    {"--tokenizer", "data.tokenizer", "tokenizer file or directory, or byte (the byte-level tokenizer)"},
};

std::string trimmed(std::string s) {
  s.erase(0, s.find_first_not_of(' '));
  s.erase(s.find_last_not_of(' ') + 1);
  return s;
}

}  // namespace

void KeyOptions::add_to(CLI::App* sub) {
  for (const KeyShortcut& k : kKeyShortcuts) {
    Option& o = options_.emplace_back(Option{k.flag, k.key, {}, nullptr});
    o.option = sub->add_option(k.flag, o.value,
                               std::string(k.what) + " (--set " + k.key + "=...; refused beside a --set of that key) "
                               "(default: the config's " + k.key + ")");
  }
  // Other tools' names by their last part, with '_' as they write it or '-'; a name of one letter
  // (PEFT's r) is no option name. Given without a value (--bf16, --gradient_checkpointing), true.
  for (const ConfigAlias& a : config_aliases()) {
    const std::string leaf(a.name.substr(a.name.rfind('.') + 1));
    if (leaf.size() < 2) continue;
    std::string dashed = leaf;
    std::replace(dashed.begin(), dashed.end(), '_', '-');
    Option& o = options_.emplace_back(Option{"--" + leaf, std::string(a.name), {}, nullptr});
    const std::string names = "--" + leaf + (dashed == leaf ? "" : ",--" + dashed);
    const std::string key(a.key);
    const std::string what = a.refusal ? "refused, saying what to give instead (default: none)"
                                       : "--set " + std::string(a.name) + "=..., that is " + key +
                                             "; refused beside a --set of it (default: the config's " + key + ")";
    o.option = sub->add_option(names, o.value, "the name in " + std::string(a.origin) + ": " + what)
                   ->expected(0, 1)
                   ->group("Other tools' names");
  }
}

std::vector<std::string> KeyOptions::overrides(const std::vector<std::string>& sets) const {
  std::vector<std::string> out;
  for (const Option& o : options_) {
    if (o.option->count() == 0) continue;
    const std::string value = o.value.empty() && o.option->get_expected_min() == 0 ? "true" : o.value;
    const std::string_view key = canonical_config_key(o.name);
    for (const std::string& set : sets)
      if (canonical_config_key(trimmed(set.substr(0, set.find('=')))) == key)
        fail(o.flag + " " + value + " and --set " + set + " both set " + std::string(key) + ": give one");
    out.push_back(o.name + "=" + value);
  }
  return out;
}

std::string option_hint(const CLI::App& sub, const std::string& argument) {
  std::vector<std::string> names;
  for (const CLI::Option* o : sub.get_options())
    for (const std::string& n : o->get_lnames()) names.push_back("--" + n);
  const std::vector<std::string_view> views(names.begin(), names.end());
  // "--learning_rate=1e-4": the name is what comes before the value.
  return did_you_mean(argument.substr(0, argument.find('=')), views);
}

}  // namespace mt::cli
