// The meshtrain command line as a function: every verb registered on one CLI11 app, the chosen one
// run, every error one line. main() is this; the CLI fuzz target (fuzz/fuzz_cli.cpp) calls it
// in-process with fuzzed argument vectors.
#pragma once

namespace mt::cli {

// Parses argv, runs the chosen verb and returns the process's exit code. mt::work_gate::Stopped
// passes through (the fuzz target's stop before a command's work).
int run_cli(int argc, char** argv);

}  // namespace mt::cli
