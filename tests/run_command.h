// Runs a shell command (stdout and stderr together) for the tests that use the meshtrain binary
// as a user does.
#pragma once
#include <array>
#include <cstdio>
#include <string>
#include <sys/wait.h>

namespace mt::testing {

struct CommandResult {
  int code = -1;  // exit status, -1 when killed by a signal
  std::string output;
};

inline CommandResult run_command(const std::string& cmd) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  CommandResult r;
  if (!p) return r;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) r.output.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// `meshtrain <args>`
inline CommandResult run_meshtrain(const std::string& args) {
  return run_command(std::string(MESHTRAIN_BINARY) + " " + args);
}

}  // namespace mt::testing
