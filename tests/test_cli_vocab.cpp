// The HF / PEFT / torchtune vocabulary through the real binary: aliases logged and recorded by
// their keys, the key shortcuts, train.epochs, LoRA dropout training (loss falls, repeatable,
// resumable bit for bit), --version, and tokenize / detokenize over lines with real tokenizers.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "run_command.h"
#include "text_files.h"
#include "temp_dirs.h"

namespace {

namespace fs = std::filesystem;
using mt::testing::CommandResult;
using mt::testing::count_of;
using mt::testing::read_file;
using mt::testing::run_command;
using mt::testing::run_meshtrain;
using mt::testing::stories_hf_dir;

const std::string kShared = std::string(MESHTRAIN_SOURCE_DIR) + "/../shared/data/";
const std::string kBinary = MESHTRAIN_BINARY;

fs::path fresh(const std::string& name) { return mt::testing::fresh_temp_dir("vocab_" + name); }

const std::string kQuick = " --set train.log_every=1 --set train.peak_gflops=100 --set data.cache_dir=off";

TEST(CliVersion, PrintsVersionCommitBuildTypeAndBackends) {
  const CommandResult r = run_meshtrain("--version");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(std::regex_match(r.output, std::regex("meshtrain [0-9]+\\.[0-9]+\\.[0-9]+\n"
                                                    "commit: ([0-9a-f]{12}(-dirty)?|unknown)\n"
                                                    "build: Release\n"
                                                    "backends: cpu(, cuda)?\n")))
      << r.output;
}

// A source tree without .git (a tarball) configures with the commit "unknown": CMake finds the
// commit at configure time, offline.
TEST(CliVersion, TheCommitIsUnknownWithoutGit) {
  const fs::path dir = fresh("tarball");
  const std::string src = MESHTRAIN_SOURCE_DIR;
  fs::create_directories(dir / "src");
  CommandResult r = run_command("cd " + src + " && tar --exclude='./build*' --exclude=./.git -cf - . | tar -xf - -C " +
                                (dir / "src").string());
  ASSERT_EQ(r.code, 0) << r.output;
  ASSERT_FALSE(fs::exists(dir / "src/.git"));
  r = run_command("timeout 300 cmake -S " + (dir / "src").string() + " -B " + (dir / "b").string() +
                  " -G Ninja -DCMAKE_BUILD_TYPE=Release");
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string info = read_file(dir / "b/generated/cli/build_info.h");
  EXPECT_NE(info.find("#define MESHTRAIN_GIT_COMMIT \"unknown\""), std::string::npos) << info;
  EXPECT_NE(info.find("#define MESHTRAIN_BUILD_TYPE \"Release\""), std::string::npos) << info;
}

TEST(CliShortcuts, EachIsASetOfItsKeyAndTheSameKeyTwiceIsRefused) {
  const fs::path dir = fresh("shortcuts");
  CommandResult r = run_meshtrain("train --steps 3 --lr 1e-3 --batch-size 2 --seq-len 32 --out " +
                                  (dir / "a").string() + kQuick);
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string recorded = read_file(dir / "a/run.toml");
  for (const char* line : {"\nsteps = 3\n", "\nlr = 0.001\n", "\nbatch_size = 2\n", "\nseq_len = 32\n"})
    EXPECT_NE(recorded.find(line), std::string::npos) << line << recorded;
  EXPECT_EQ(mt::testing::metric_losses(dir / "a/metrics.jsonl").size(), 3u);
  for (const std::string twice : {"--steps 3 --set train.steps=4", "--steps 3 --set train.max_steps=4",
                                  "--lr 1e-3 --set train.learning_rate=1e-3", "--seq-len 32 --set train.seq_len=64"}) {
    r = run_meshtrain("train " + twice + " --out " + (dir / "b").string() + kQuick);
    EXPECT_NE(r.code, 0) << twice;
    EXPECT_EQ(count_of(r.output, "\n"), 1u) << r.output;
    EXPECT_NE(r.output.find("both set "), std::string::npos) << r.output;
  }
  r = run_meshtrain("train --steps 3 --epochs 1 --out " + (dir / "b").string() + kQuick);
  EXPECT_NE(r.output.find("train.steps and train.epochs both give the run's length: give one"), std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(dir / "b"));
}

TEST(CliAliases, AreLoggedOnceAndRecordedByTheirKeys) {
  if (!fs::exists(kShared + "stories260K/stories260K.bin")) GTEST_SKIP() << "shared data not present";
  const fs::path dir = fresh("aliases");
  const std::string model = stories_hf_dir(dir);
  std::ofstream(dir / "peft.toml") << "[lora]\nenabled = true\nr = 4\nlora_alpha = 8\n"
                                      "target_modules = [\"q_proj\", \"v_proj\"]\n"
                                      "[train]\nlearning_rate = 1e-3\nmax_steps = 2\nseq_len = 64\nbatch_size = 2\n";
  const CommandResult r = run_meshtrain("train --config " + (dir / "peft.toml").string() + " --model " + model +
                                        " --set lora.lora_dropout=0.1 --out " + (dir / "run").string() + kQuick);
  ASSERT_EQ(r.code, 0) << r.output;
  for (const char* line : {"config: lora.r -> lora.rank\n", "config: lora.lora_alpha -> lora.alpha\n",
                           "config: lora.target_modules -> lora.targets\n", "config: train.learning_rate -> optim.lr\n",
                           "config: train.max_steps -> train.steps\n", "config: lora.lora_dropout -> lora.dropout\n"})
    EXPECT_EQ(count_of(r.output, line), 1u) << line << r.output;
  const std::string recorded = read_file(dir / "run/run.toml");
  for (const char* line : {"rank = 4\n", "alpha = 8.0\n", "targets = [\"q\", \"v\"]\n", "dropout = 0.1\n", "\nlr = 0.001\n"})
    EXPECT_NE(recorded.find(line), std::string::npos) << line << recorded;
  EXPECT_EQ(recorded.find("lora_alpha"), std::string::npos) << recorded;
}

// Plain text: an epoch is train tokens / seq_len rows; the steps are printed and run.
TEST(CliEpochs, StepsComeFromTheDataAndArePrinted) {
  const fs::path dir = fresh("epochs");
  const CommandResult r = run_meshtrain("train --epochs 0.004 --batch-size 4 --seq-len 64 --data " + kShared +
                                        "text/tinyshakespeare.txt --out " + (dir / "run").string() + kQuick);
  ASSERT_EQ(r.code, 0) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex(R"(epochs: 0\.004 x (\d+) rows / \(4 x 1 rows a step\) = (\d+) steps)")))
      << r.output;
  const int64_t rows = std::stoll(m[1]), steps = std::stoll(m[2]);
  EXPECT_GT(rows, 10000);  // ~1 MB of text at ~1 byte a token, 64 a row, less the held-out tail
  EXPECT_EQ(steps, int64_t(std::ceil(double(0.004f) * double(rows) / 4.0)));
  EXPECT_EQ(int64_t(mt::testing::metric_losses(dir / "run/metrics.jsonl").size()), steps);
  const std::string recorded = read_file(dir / "run/run.toml");
  EXPECT_NE(recorded.find("epochs = 0.004\n"), std::string::npos) << recorded;
  EXPECT_EQ(recorded.find("\nsteps = "), std::string::npos) << recorded;
}

// A LoRA fine-tune with dropout trains (the loss falls), repeats bit for bit, differs from one
// without dropout, and a run stopped and resumed ends with the uninterrupted run's adapter.
TEST(CliLoraDropout, TrainsRepeatsAndResumesExactly) {
  if (!fs::exists(kShared + "stories260K/stories260K.bin")) GTEST_SKIP() << "shared data not present";
  const fs::path dir = fresh("dropout");
  const std::string model = stories_hf_dir(dir);
  // A constant lr (no warm-up) so that a run of 12 steps and one of 6 resumed to 12 share their schedule.
  const std::string run = "train --model " + model + " --lora --data " + kShared +
                          "text/tinyshakespeare.txt --seq-len 64 --batch-size 4 --lr 5e-3 "
                          "--set optim.schedule=constant --set optim.warmup_steps=0 --set train.seed=3" + kQuick;
  CommandResult r = run_meshtrain(run + " --steps 12 --set lora.dropout=0.2 --out " + (dir / "a").string());
  ASSERT_EQ(r.code, 0) << r.output;
  const std::vector<double> loss = mt::testing::metric_losses(dir / "a/metrics.jsonl");
  ASSERT_EQ(loss.size(), 12u);
  EXPECT_LT((loss[9] + loss[10] + loss[11]) / 3, (loss[0] + loss[1] + loss[2]) / 3 - 0.05) << r.output;
  const std::string adapter = read_file(dir / "a/adapter/adapter_model.safetensors");
  ASSERT_FALSE(adapter.empty());

  r = run_meshtrain(run + " --steps 12 --set lora.dropout=0.2 --out " + (dir / "again").string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(read_file(dir / "again/adapter/adapter_model.safetensors"), adapter);

  r = run_meshtrain(run + " --steps 12 --out " + (dir / "none").string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(read_file(dir / "none/adapter/adapter_model.safetensors"), adapter);

  r = run_meshtrain(run + " --steps 6 --set lora.dropout=0.2 --set output.checkpoint_every=6 --out " +
                    (dir / "b").string());
  ASSERT_EQ(r.code, 0) << r.output;
  r = run_meshtrain(run + " --steps 12 --set lora.dropout=0.2 --set output.checkpoint_every=6 --set train.resume=latest --out " +
                    (dir / "b").string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(read_file(dir / "b/adapter/adapter_model.safetensors"), adapter);
  EXPECT_EQ(mt::testing::metric_losses(dir / "b/metrics.jsonl"), loss);
}

// tokenize: one text per line from a file or stdin, JSON lines out; detokenize turns them (or
// plain ids) back into the same lines.
TEST(CliTokenize, LinesInJsonLinesOutAndBack) {
  const std::string gpt2 = kShared + "tokenizers/gpt2";
  if (!fs::exists(gpt2 + "/vocab.json")) GTEST_SKIP() << "shared data not present";
  const fs::path dir = fresh("tokenize");
  // GPT-2's well-known ids: "Hello" 15496, " world" 995.
  CommandResult r = run_meshtrain("tokenize -t " + gpt2 + " --text 'Hello world'");
  EXPECT_EQ(r.output, "[15496, 995]\n");
  const std::string lines = "Hello world\n\nna\xc3\xafve caf\xc3\xa9 \xf0\x9f\x98\x80 \"quoted\" \\ back\r\nno newline";
  std::ofstream(dir / "texts.txt", std::ios::binary) << lines;
  r = run_command("printf 'Hello world\\n\\n' | " + kBinary + " tokenize -t " + gpt2);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output, "{\"text\":\"Hello world\",\"ids\":[15496,995]}\n{\"text\":\"\",\"ids\":[]}\n");
  for (const std::string& tok : {gpt2, kShared + "tokenizers/llama3"}) {  // byte-level BPE, tiktoken
    SCOPED_TRACE(tok);
    const std::string jsonl = (dir / "ids.jsonl").string();
    r = run_command(kBinary + " tokenize -t " + tok + " --input " + (dir / "texts.txt").string() + " > " + jsonl);
    ASSERT_EQ(r.code, 0) << r.output;
    EXPECT_EQ(count_of(read_file(jsonl), "\n"), 4u);
    r = run_command("cat " + jsonl + " | " + kBinary + " detokenize -t " + tok);
    ASSERT_EQ(r.code, 0) << r.output;
    EXPECT_EQ(r.output, "Hello world\n\nna\xc3\xafve caf\xc3\xa9 \xf0\x9f\x98\x80 \"quoted\" \\ back\nno newline\n");
  }
  // Plain ids, a JSON list, and --jsonl out.
  std::ofstream(dir / "ids.txt") << "15496 995\n[15496, 995]\n\n";
  r = run_meshtrain("detokenize -t " + gpt2 + " --input " + (dir / "ids.txt").string());
  EXPECT_EQ(r.output, "Hello world\nHello world\n\n");
  r = run_meshtrain("detokenize -t " + gpt2 + " --ids '15496 995' --jsonl");
  EXPECT_EQ(r.output, "{\"ids\":[15496,995],\"text\":\"Hello world\"}\n");
}

TEST(CliTokenize, BadLinesAreRefusedInOneLineNamingTheLine) {
  const std::string gpt2 = kShared + "tokenizers/gpt2";
  if (!fs::exists(gpt2 + "/vocab.json")) GTEST_SKIP() << "shared data not present";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"printf '1 2\\n99999999\\n' | " + kBinary + " detokenize -t " + gpt2,
       "stdin:2: token id 99999999 is outside the vocabulary [0, 50257)"},
      {"printf '1 x2\\n' | " + kBinary + " detokenize -t " + gpt2, "stdin:1: expected token ids"},
      {"printf '[1, \"a\"]\\n' | " + kBinary + " detokenize -t " + gpt2, "stdin:1: ids must be integers"},
      {"printf '{\"text\": 1}\\n' | " + kBinary + " detokenize -t " + gpt2, "stdin:1: a JSON object needs an \"ids\" list"},
      {"printf 'ok\\n\\377\\n' | " + kBinary + " tokenize -t " + gpt2, "stdin:2: the text is not valid UTF-8"},
      {kBinary + " tokenize -t " + gpt2 + " --input /nonexistent/x.txt", "cannot open input '/nonexistent/x.txt'"},
  };
  for (const auto& [cmd, message] : cases) {
    const CommandResult r = run_command(cmd);
    EXPECT_NE(r.code, 0) << cmd;
    EXPECT_NE(r.output.find("meshtrain: error: " + message), std::string::npos) << cmd << "\n" << r.output;
    EXPECT_EQ(count_of(r.output.substr(r.output.find("meshtrain: error")), "\n"), 1u) << r.output;
  }
}

}  // namespace
