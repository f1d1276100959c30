// Where a command turns from checking its arguments to doing its work (loading a model, reading
// data, allocating what the arguments ask for). Ordinarily a no-op. The CLI fuzz target
// (fuzz/fuzz_cli.cpp) closes the gate, so that each fuzzed command line runs every check of its
// command and stops where the work would start: a count nobody checked before this point can then
// only show as the crash, hang or huge allocation libFuzzer reports.
#pragma once

namespace mt::work_gate {

// Thrown by reached() while the gate is closed; not an std::exception, so that the CLI's error
// handling cannot mistake it for a refusal.
struct Stopped {
  const char* where;
};

void close();  // from then on, reached() throws Stopped
// Called by a command just before its first allocation or output; `where` names the point.
void reached(const char* where);

}  // namespace mt::work_gate
