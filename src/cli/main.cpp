// meshtrain: train and fine-tune LLaMA-family models. One file per verb in this directory.
#include <iostream>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"meshtrain: LLaMA training and LoRA fine-tuning over a device mesh"};
  app.require_subcommand(1);
  std::vector<std::pair<CLI::App*, mt::cli::Action>> verbs;
  auto add = [&](mt::cli::Action (*reg)(CLI::App&)) {
    size_t before = app.get_subcommands({}).size();
    auto action = reg(app);
    verbs.emplace_back(app.get_subcommands({})[before], action);
  };
  add(mt::cli::add_train_command);
  add(mt::cli::add_bench_command);
  add(mt::cli::add_tokenize_command);
  add(mt::cli::add_convert_command);
  add(mt::cli::add_generate_command);
  add(mt::cli::add_eval_command);
  add(mt::cli::add_export_command);
  add(mt::cli::add_shard_command);
  add(mt::cli::add_plan_command);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (auto& [sub, action] : verbs)
      if (sub->parsed()) return action();
  } catch (const mt::Error& e) {
    std::cerr << "meshtrain: error: " << e.what() << std::endl;
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "meshtrain: error: out of memory" << std::endl;
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "meshtrain: error: " << e.what() << std::endl;
    return 1;
  }
  return 0;
}
