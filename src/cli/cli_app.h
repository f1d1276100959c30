// The meshtrain command line as a function: every verb registered on one CLI11 app, the chosen one
// run, every error one line. main() is this; the CLI fuzz target (fuzz/fuzz_cli.cpp) calls it
// in-process with fuzzed argument vectors.
#pragma once
#include <utility>
#include <vector>

#include "cli/commands.h"

namespace mt::cli {

// Registers every verb on `app`, in the order --help lists them: each subcommand with its action.
std::vector<std::pair<CLI::App*, Action>> add_verbs(CLI::App& app);

// Parses argv, runs the chosen verb and returns the process's exit code. mt::work_gate::Stopped
// passes through (the fuzz target's stop before a command's work).
int run_cli(int argc, char** argv);

}  // namespace mt::cli
