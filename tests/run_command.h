// Runs a shell command (stdout and stderr together) for the tests that use the meshtrain binary
// as a user does.
#pragma once
#include <array>
#include <cstdio>
#include <filesystem>
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

// stories260K (../shared/data) as an HF directory under `under`, the form users have their models
// in: `meshtrain convert` of the llama2.c file with its tokenizer. "" when the conversion failed
// (with the output on stderr), so a test's next step fails visibly.
inline std::string stories_hf_dir(const std::filesystem::path& under) {
  const std::string shared = std::string(MESHTRAIN_SOURCE_DIR) + "/../shared/data/stories260K/";
  const std::string dir = (under / "stories260K").string();
  const CommandResult r = run_meshtrain("convert --llama2c " + shared + "stories260K.bin --tokenizer " + shared +
                                        "tok512.bin --out " + dir);
  if (r.code == 0) return dir;
  std::fprintf(stderr, "convert failed:\n%s\n", r.output.c_str());
  return "";
}

}  // namespace mt::testing
