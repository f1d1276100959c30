// The options of `train` that each stand for a --set of one config key: meshtrain's shortcuts for
// the keys one most often changes (--steps, --lr, ...), and every other tool's name for a key
// (train/config_aliases.h) as that tool's command line spells it: --learning_rate 1e-4 or
// --learning-rate 1e-4 is --set train.learning_rate=1e-4, as the HF Trainer's scripts take it.
// Unlike --model or --out (which a --set of the same key overrides), one given with a --set of its
// key (by any name: train.max_steps is train.steps) is refused: the two name the same value twice.
#pragma once
#include <CLI/CLI.hpp>
#include <deque>
#include <string>
#include <vector>

namespace mt::cli {

class KeyOptions {
 public:
  void add_to(CLI::App* sub);
  // "name=value" for each option given, in the order declared; refuses one given beside a --set
  // (in `sets`) of the same key.
  std::vector<std::string> overrides(const std::vector<std::string>& sets) const;

 private:
  struct Option {
    std::string flag;  // "--learning_rate": the first of its names, for messages
    std::string name;  // the key or alias it sets
    std::string value;
    CLI::Option* option = nullptr;
  };
  std::deque<Option> options_;  // CLI11 writes into each value: their addresses must not move
};

// For an argument `train` does not take: " (did you mean '--x'?)" naming the option of `sub` it
// misspells, or "".
std::string option_hint(const CLI::App& sub, const std::string& argument);

}  // namespace mt::cli
