// Writes the seed corpus for fuzz_run_config into the directory given as argv[1]: the built-in
// default run, the repository's configs/*.toml (run from the repository root, as fuzz.sh does), a
// complete run.toml with LoRA, a model path and partition rules, and a config with --set lines.
#include <filesystem>
#include <fstream>
#include <string>

#include "train/run_config.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  namespace fs = std::filesystem;
  const std::string dir = argv[1];
  std::ofstream(dir + "/default.toml") << mt::default_run_config_toml();
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("configs", ec))
    if (e.path().extension() == ".toml") fs::copy_file(e.path(), dir + "/" + e.path().filename().string(), ec);

  mt::RunConfig lora = mt::parse_run_config(R"(
[lora]
enabled = true
rank = 4
targets = ["q", "v", "lm_head"]
[mesh]
fsdp = 2
tp = 2
[[partition.rules]]
pattern = '.*q_proj\.weight'
spec = ["tp", ["fsdp", "dp"]]
)", {});
  std::ofstream(dir + "/run_lora.toml") << mt::to_toml(lora);
  std::ofstream(dir + "/run_path.toml") << mt::to_toml(mt::parse_run_config("[model]\npath = \"m\"\n", {}));
  std::ofstream(dir + "/overrides") << std::string("[train]\nsteps = 3\n") + '\0'
                                    << "train.seq_len=64\nlora.targets=[\"q\"]\ndata.path=inf\nmodel.rope_scaling.factor=8.0";
  return 0;
}
