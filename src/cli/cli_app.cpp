#include "cli/cli_app.h"

#include <chrono>
#include <iostream>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "cli/help_formatter.h"
#include "cli/version.h"
#include "core/clipped.h"
#include "core/error.h"
#include "core/one_line.h"
#include "parallel/comm.h"
#include "parallel/launch_env.h"

namespace mt::cli {

namespace {

// The rank an error names. Once MPI runs, its world's; before, the launcher's: an error found while
// checking the configuration, before MPI starts, is met alike by every rank of a launch, and is
// said once, by rank 0. Another rank waits a moment first: when rank 0 failed too, mpirun ends the
// job (and this rank) while it waits; an error of this rank alone is still said, naming it.
std::string rank_of_error() {
  std::string rank = parallel::world_rank_label();
  if (!rank.empty()) return rank;
  parallel::LaunchEnv env;
  try {
    env = parallel::read_launch_env();
  } catch (const Error&) {
    return "";  // the launcher's variables were the error itself
  }
  if (env.size <= 1) return "";
  if (env.rank > 0) std::this_thread::sleep_for(std::chrono::seconds(3));
  return "rank " + std::to_string(env.rank) + "/" + std::to_string(env.size);
}

}  // namespace

std::vector<std::pair<CLI::App*, Action>> add_verbs(CLI::App& app) {
  std::vector<std::pair<CLI::App*, Action>> verbs;
  for (Action (*reg)(CLI::App&) :
       {add_train_command, add_bench_command, add_tokenize_command, add_detokenize_command, add_convert_command,
        add_generate_command, add_chat_command, add_eval_command, add_export_command, add_export_checkpoint_command,
        add_shard_command, add_plan_command, add_report_command}) {
    Action action = reg(app);
    verbs.emplace_back(app.get_subcommands({}).back(), std::move(action));
  }
  return verbs;
}

int run_cli(int argc, char** argv) {
  CLI::App app{"meshtrain: LLaMA training and LoRA fine-tuning over a device mesh"};
  app.require_subcommand(1);
  show_defaults_in_help(app);
  // Printed (to stdout, exit 0) before the subcommand is required.
  app.set_version_flag("--version", [] {
    std::string text = version_text();
    text.pop_back();  // CLI11 ends the message with its own newline
    return text;
  }, "Print the version, git commit, build type and compiled-in backends, and exit");
  const std::vector<std::pair<CLI::App*, Action>> verbs = add_verbs(app);
  // A bad option is one line like every other error (CLI11's default adds "Run with --help"), an
  // argument's line breaks escaped, and short: CLI11 quotes the arguments it did not expect whole.
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    const std::string rank = rank_of_error();
    return "meshtrain: error" + (rank.empty() ? "" : " [" + rank + "]") + ": " + clipped(one_line(e.what()), 300) +
           " (see --help)\n";
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  // One line per error (control characters of quoted values escaped); under a launcher it names the
  // rank, and the whole job is ended so that no rank waits forever in a collective for the one that
  // failed.
  auto report = [](const std::string& what) {
    const std::string rank = rank_of_error();
    std::cerr << "meshtrain: error" << (rank.empty() ? "" : " [" + rank + "]") << ": " << one_line(what)
              << std::endl;
    parallel::abort_world_after_error(1);
    return 1;
  };
  try {
    for (auto& [sub, action] : verbs)
      if (sub->parsed()) return action();
  } catch (const Error& e) {
    return report(e.what());
  } catch (const std::bad_alloc&) {
    return report("out of memory");
  } catch (const std::exception& e) {
    return report(e.what());
  }
  return 0;
}

}  // namespace mt::cli
