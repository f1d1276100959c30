// The path a new user takes, through the real binary: fine-tune a model in one line, be refused a
// LoRA run with nothing to adapt, run a config from anywhere, see data warnings once, and the
// README's "Fine-tune your own model" commands, its mesh example and its plan run as written.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "mesh_runs.h"
#include "run_command.h"
#include "text_files.h"
#include "temp_dirs.h"

namespace {

namespace fs = std::filesystem;
using mt::testing::CommandResult;
using mt::testing::run_command;
using mt::testing::run_meshtrain;
using mt::testing::stories_hf_dir;
using mt::testing::count_of, mt::testing::read_file;

const std::string kShared = std::string(MESHTRAIN_SOURCE_DIR) + "/../shared/data/";

fs::path fresh(const std::string& name) { return mt::testing::fresh_temp_dir("user_path_" + name); }

// Quick settings for a run that only has to show it works.
const std::string kQuick =
    " --set train.steps=2 --set train.batch_size=2 --set train.log_every=1 --set train.peak_gflops=100 "
    "--set data.cache_dir=off";

// The issue's words: no --config, and the built-in run's [model] section does not get in the way.
TEST(UserPath, FineTunesAModelInOneLine) {
  if (!fs::exists(kShared + "stories260K/stories260K.bin")) GTEST_SKIP() << "shared data not present";
  const fs::path dir = fresh("one_line");
  const std::string model = stories_hf_dir(dir);
  const std::string data = kShared + "instruct/alpaca_tiny.json";
  CommandResult r = run_meshtrain("train --set model.path=" + model + " --set lora.enabled=true --set data.path=" +
                                  data + " --set train.seq_len=512 --set output.dir=" + (dir / "a").string() + kQuick);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("LoRA training, bf16 mixed, " + model), std::string::npos) << r.output;
  EXPECT_TRUE(fs::exists(dir / "a/adapter/adapter_model.safetensors")) << r.output;
  // The shorthands are the same run.
  r = run_meshtrain("train --model " + model + " --lora --data " + data + " --out " + (dir / "b").string() +
                    " --set train.seq_len=512" + kQuick);
  ASSERT_EQ(r.code, 0) << r.output;
  std::string a = read_file(dir / "a/run.toml"), b = read_file(dir / "b/run.toml");
  a.replace(a.find((dir / "a").string()), (dir / "a").string().size(), "OUT");
  b.replace(b.find((dir / "b").string()), (dir / "b").string().size(), "OUT");
  EXPECT_EQ(a, b);
  EXPECT_EQ(read_file(dir / "a/adapter/adapter_model.safetensors"),
            read_file(dir / "b/adapter/adapter_model.safetensors"));
}

// An adapter trained on a random base that is never saved fits nothing: refused in one line,
// before anything is written.
TEST(UserPath, LoraWithoutABaseModelIsRefused) {
  const fs::path dir = fresh("no_base");
  for (const std::string lora : {"--lora", "--set lora.enabled=true"}) {
    const CommandResult r = run_meshtrain("train " + lora + " --out " + (dir / "run").string() + kQuick);
    EXPECT_NE(r.code, 0) << r.output;
    EXPECT_NE(r.output.find("error: lora.enabled = true needs the base model the adapter is for: give "
                            "model.path (--model DIR)"), std::string::npos) << r.output;
    EXPECT_EQ(count_of(r.output, "\n"), 1u) << r.output;
  }
  EXPECT_FALSE(fs::exists(dir / "run"));
}

// A config's data.path is relative to the config, so the run works from another directory; and
// run.toml records it absolute, so it repeats from anywhere too.
TEST(UserPath, ConfigWorksFromAnyDirectory) {
  const fs::path dir = fresh("any_dir");
  fs::create_directories(dir / "configs");
  {
    std::ofstream text(dir / "configs/corpus.txt");
    for (int i = 0; i < 400; ++i) text << "line " << i << ": the quick brown fox jumps over the lazy dog.\n";
  }
  std::ofstream(dir / "configs/run.toml") << "[data]\npath = \"corpus.txt\"\n[train]\nseq_len = 64\n";
  const std::string out = (dir / "out").string();
  CommandResult r = run_command("cd / && " + std::string(MESHTRAIN_BINARY) + " train --config " +
                                (dir / "configs/run.toml").string() + " --set output.dir=" + out + kQuick);
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string recorded = read_file(out + "/run.toml");
  EXPECT_NE(recorded.find("path = \"" + (dir / "configs/corpus.txt").string() + "\""), std::string::npos)
      << recorded;
  r = run_command("cd / && " + std::string(MESHTRAIN_BINARY) + " train --config " + out +
                  "/run.toml --set output.dir=" + out + "_again");
  EXPECT_EQ(r.code, 0) << r.output;
}

// `meshtrain shard --config` reads a config as `train` does: its model.path is relative to the file.
TEST(UserPath, ShardReadsAConfigsModelPathRelativeToTheFile) {
  if (!fs::exists(kShared + "stories260K/stories260K.bin")) GTEST_SKIP() << "shared data not present";
  const fs::path dir = fresh("shard_config");
  fs::create_directories(dir / "configs");
  fs::copy_file(kShared + "stories260K/stories260K.bin", dir / "configs/model.bin");
  std::ofstream(dir / "configs/run.toml") << "[model]\npath = \"model.bin\"\n[mesh]\ntp = 2\n";
  const CommandResult r = run_command("cd / && " + std::string(MESHTRAIN_BINARY) + " shard --config " +
                                      (dir / "configs/run.toml").string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("x 5 layers"), std::string::npos) << r.output;  // stories260K's depth
}

// Examples skipped for length: one warning, from rank 0 only, with the count and, since the
// longest is beyond the built-in model's 256 positions, the model's limit rather than a length it
// cannot take, before the first step.
TEST(UserPath, DataWarningsArePrintedOnceByRankZeroBeforeTraining) {
  if (!fs::exists(kShared + "instruct/alpaca_tiny.json")) GTEST_SKIP() << "shared data not present";
  const fs::path dir = fresh("warnings");
  // The byte-level tokenizer of the built-in model makes many Alpaca records longer than 256.
  const std::string args = "train --data " + kShared + "instruct/alpaca_tiny.json --set train.seq_len=256 --out " +
                           (dir / "run").string() + kQuick;
  const bool mpi = mt::testing::have_mpirun();
  const CommandResult r = run_command(mpi ? mt::testing::mpirun(2) + MESHTRAIN_BINARY + " " + args + " --mesh dp=2"
                                          : std::string(MESHTRAIN_BINARY) + " " + args);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(count_of(r.output, "records skipped"), 1u) << r.output;
  const size_t warning = r.output.find("records skipped");
  EXPECT_NE(r.output.find("longer than the sequence length 256: the longest is "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("more than the model's limit of 256: truncate them"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("a sequence length of "), std::string::npos) << r.output;
  EXPECT_LT(warning, r.output.find("step 1/")) << r.output;
}

// The README's shell block between <!-- NAME:begin --> and <!-- NAME:end -->, as written.
std::string readme_block(const std::string& name) {
  const std::string readme = read_file(std::string(MESHTRAIN_SOURCE_DIR) + "/README.md");
  const std::string begin = "<!-- " + name + ":begin -->\n```sh\n", end = "```\n<!-- " + name + ":end -->";
  const size_t b = readme.find(begin), e = readme.find(end);
  EXPECT_NE(b, std::string::npos) << "README.md has no " << begin;
  EXPECT_NE(e, std::string::npos) << "README.md has no " << end;
  if (b == std::string::npos || e == std::string::npos || e < b) return "";
  return readme.substr(b + begin.size(), e - b - begin.size());
}

// A copy of the layout the README's commands assume (the project with ../shared/data beside it):
// dir/project, with dir/shared a link to the shared data.
fs::path readme_layout(const std::string& name) {
  const fs::path dir = fresh(name);
  fs::create_directories(dir / "project");
  fs::create_directory_symlink(fs::canonical(fs::path(MESHTRAIN_SOURCE_DIR) / "../shared"), dir / "shared");
  return dir;
}

// `script` run by bash in dir/project, with meshtrain on the PATH, as the README says to run it.
CommandResult run_in_layout(const fs::path& dir, const std::string& script) {
  std::ofstream(dir / "commands.sh") << "set -eux\n" << script;
  return run_command("cd " + (dir / "project").string() + " && PATH=" +
                     fs::path(MESHTRAIN_BINARY).parent_path().string() + ":$PATH MESHTRAIN_CACHE_DIR=" +
                     (dir / "cache").string() + " bash " + (dir / "commands.sh").string());
}

// The README's walk-through, its code block run as written.
TEST(UserPath, ReadmeWalkthroughRunsAsWritten) {
  if (!fs::exists(kShared + "stories260K/stories260K.bin")) GTEST_SKIP() << "shared data not present";
  const std::string block = readme_block("walkthrough");
  ASSERT_FALSE(block.empty());
  const fs::path dir = readme_layout("walkthrough");
  const CommandResult r = run_in_layout(dir, block);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("resume: taking runs/stories-lora/run.toml; overridden: train.steps=12 (was 6)"),
            std::string::npos) << r.output;
  EXPECT_EQ(mt::testing::metric((dir / "project/runs/stories-lora").string(), "step").size(), 12u);
  for (const char* made : {"runs/stories-lora/adapter/adapter_model.safetensors",
                           "runs/stories-lora/adapter/adapter_config.json", "runs/stories-merged/config.json",
                           "runs/stories-merged/model.safetensors", "runs/stories-merged.gguf",
                           "runs/stories-lora/adapter.gguf"})
    EXPECT_TRUE(fs::exists(dir / "project" / made)) << made << "\n" << r.output;
}

// The README's mesh example, after the walk-through's step 0 (the model it trains), as written but
// for the flags the README tells containers and small machines to add (mpirun(8) carries them).
TEST(UserPath, ReadmeMeshExampleRuns) {
  if (!fs::exists(kShared + "stories260K/stories260K.bin")) GTEST_SKIP() << "shared data not present";
  if (!mt::testing::have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  const std::string walkthrough = readme_block("walkthrough"), example = readme_block("mesh-example");
  const std::string step0 = "meshtrain convert ", launch = "OMP_NUM_THREADS=1 mpirun -n 8 ";
  const size_t convert = walkthrough.find(step0), convert_end = walkthrough.find("\n#", convert);
  ASSERT_NE(convert_end, std::string::npos) << walkthrough;
  ASSERT_EQ(example.rfind(launch, 0), 0u) << example;
  const std::string script = walkthrough.substr(convert, convert_end + 1 - convert) +
                             mt::testing::mpirun(8) + example.substr(launch.size());
  const fs::path dir = readme_layout("mesh_example");
  const CommandResult r = run_in_layout(dir, script);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("world: 8 ranks"), std::string::npos) << r.output;
  EXPECT_EQ(mt::testing::metric((dir / "project/runs/mesh-lora").string(), "step").size(), 20u);
  EXPECT_TRUE(fs::exists(dir / "project/runs/mesh-lora/adapter/adapter_model.safetensors")) << r.output;
}

// The README's plan example: the seed's 405B LoRA layout on one MI300X node fits.
TEST(UserPath, ReadmePlanExampleRuns) {
  const std::string block = readme_block("plan-example");
  ASSERT_EQ(block.rfind("meshtrain plan ", 0), 0u) << block;
  const fs::path dir = readme_layout("plan_example");
  const CommandResult r = run_in_layout(dir, block);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("312879104 trainable"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" fits"), std::string::npos) << r.output;
}

}  // namespace
