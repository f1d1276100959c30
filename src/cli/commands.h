// Each verb of the meshtrain command line registers itself on the app; main() runs the one chosen.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>

namespace mt::cli {

// Registers the subcommand and returns the action to run when it is selected.
using Action = std::function<int()>;
Action add_train_command(CLI::App& app);
Action add_bench_command(CLI::App& app);
Action add_tokenize_command(CLI::App& app);
Action add_detokenize_command(CLI::App& app);
Action add_generate_command(CLI::App& app);
Action add_chat_command(CLI::App& app);
Action add_eval_command(CLI::App& app);
Action add_convert_command(CLI::App& app);
Action add_export_command(CLI::App& app);
Action add_export_checkpoint_command(CLI::App& app);
Action add_shard_command(CLI::App& app);
Action add_plan_command(CLI::App& app);
Action add_report_command(CLI::App& app);

}  // namespace mt::cli
