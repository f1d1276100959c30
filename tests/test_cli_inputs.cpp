// Friendly inputs: `eval` on an Alpaca / chat file evaluates the examples as training computes
// them (template, loss only on responses), and a Hugging Face Hub id given as a model path is
// looked up in the Hub's cache by every verb (tests/test_hub_models.cpp downloads them).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "data/examples.h"
#include "data/tokenizer.h"
#include "data_fixtures.h"
#include "io/pretrained.h"
#include "run_command.h"
#include "temp_dirs.h"

namespace {

using mt::testing::CommandResult;
using mt::testing::run_meshtrain;

size_t lines_of(const std::string& s) { return size_t(std::count(s.begin(), s.end(), '\n')); }

// `meshtrain ARGS` offline with an empty Hub cache in `dir`: the id is looked for there and refused
// in one line naming it and the cache's directory for it (nothing is downloaded).
void expect_hub_answer(const std::string& args, const std::string& id, const std::string& dir) {
  const std::string cache = dir + "/hf_cache";
  const CommandResult r = mt::testing::run_command("env HF_HUB_OFFLINE=1 HF_HUB_CACHE=" + cache + " " +
                                                   MESHTRAIN_BINARY + " " + args);
  EXPECT_NE(r.code, 0) << args;
  std::string folder = "models--" + id;
  folder.replace(folder.find('/'), 1, "--");
  EXPECT_NE(r.output.find("meshtrain: error: '" + id + "' (revision main) is not in the Hugging Face cache at " +
                          cache + "/" + folder + ", and HF_HUB_OFFLINE is set"),
            std::string::npos)
      << args << "\n" << r.output;
  EXPECT_EQ(lines_of(r.output), 1u) << args << "\n" << r.output;
}

TEST(CliInputs, HubIdAsModelPathIsLookedUpInTheHubCache) {
  const std::string dir = mt::testing::fresh_temp_dir("cli_hub");
  // Every entry that takes a model path: the loading verbs, plan, shard and a run's model.path.
  expect_hub_answer("generate -m meta-llama/Llama-3.2-1B -n 1", "meta-llama/Llama-3.2-1B", dir);
  expect_hub_answer("eval -m TinyLlama/TinyLlama-1.1B-Chat-v1.0 -d " + dir + "/none.txt",
                    "TinyLlama/TinyLlama-1.1B-Chat-v1.0", dir);
  expect_hub_answer("export -m meta-llama/Llama-3.2-1B --merged " + dir + "/merged", "meta-llama/Llama-3.2-1B", dir);
  expect_hub_answer("plan --model meta-llama/Llama-3.2-1B --mesh dp=1", "meta-llama/Llama-3.2-1B", dir);
  expect_hub_answer("shard --model meta-llama/Llama-3.2-1B --mesh dp=1", "meta-llama/Llama-3.2-1B", dir);
  const std::string run = dir + "/run.toml";
  std::ofstream(run) << "[output]\ndir = \"" << dir << "/out\"\n";
  expect_hub_answer("train --config " + run + " --set model.path=TinyLlama/TinyLlama-1.1B-Chat-v1.0",
                    "TinyLlama/TinyLlama-1.1B-Chat-v1.0", dir);
  // In a config file, an id with no such path beside the file stays an id (not made relative to it).
  const std::string hub_run = dir + "/hub_run.toml";
  std::ofstream(hub_run) << "[model]\npath = \"TinyLlama/TinyLlama-1.1B-Chat-v1.0\"\n[output]\ndir = \"" << dir
                         << "/out2\"\n";
  expect_hub_answer("train --config " + hub_run, "TinyLlama/TinyLlama-1.1B-Chat-v1.0", dir);
  // A missing path that is not shaped like ORG/NAME keeps the plain answer.
  const CommandResult r = run_meshtrain("generate -m " + dir + "/no/such/model -n 1");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("model path does not exist"), std::string::npos) << r.output;
}

// The masked loss of one example on its own, as training defines it: token t + 1 is predicted
// from tokens 0..t and counts only when it is response text (trained).
mt::LossSum example_loss(mt::Transformer& model, const mt::Example& ex) {
  const int64_t n = int64_t(ex.tokens.size());
  std::vector<int32_t> targets(size_t(n), -1);
  for (int64_t t = 0; t + 1 < n; ++t)
    if (ex.trained[size_t(t + 1)]) targets[size_t(t)] = ex.tokens[size_t(t + 1)];
  mt::ModelInput in;
  in.tokens = ex.tokens.data(), in.targets = targets.data(), in.B = 1, in.T = n;
  return model.forward_loss(in);
}

TEST(CliInputs, EvalOnAlpacaFileIsTheMaskedExampleLoss) {
  MT_REQUIRE_DATA("stories260K/stories260K.bin");
  MT_REQUIRE_DATA("instruct/alpaca_tiny.json");
  const std::string data = mt::testdata::data_dir();
  const std::string dir = mt::testing::fresh_temp_dir("cli_eval_examples") + "/model";
  CommandResult r = run_meshtrain("convert --llama2c " + data + "stories260K/stories260K.bin --tokenizer " +
                                  data + "stories260K/tok512.bin --out " + dir);
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string alpaca = data + "instruct/alpaca_tiny.json";
  r = run_meshtrain("eval -m " + dir + " -d " + alpaca + " --seq-len 256 --batch 4");
  ASSERT_EQ(r.code, 0) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      r.output, m,
      std::regex(R"(eval: (\d+) examples \(alpaca, (\d+) skipped\), trained (\d+) tokens, mean loss ([-+.0-9e]+))")))
      << r.output;

  // The same examples, each alone and unpacked, through the library.
  const auto tok = mt::load_tokenizer(dir);
  mt::ExampleOptions opt;
  opt.max_tokens = 256;
  opt.quiet = true;
  const mt::ExampleSet set = mt::read_examples(alpaca, *tok, opt);
  auto model = mt::load_pretrained(dir, mt::Precision::fp32, mt::LoraConfig{}, 0);
  mt::LossSum total;
  for (const mt::Example& ex : set.examples) {
    const mt::LossSum s = example_loss(*model, ex);
    total.sum += s.sum, total.count += s.count;
  }
  EXPECT_EQ(std::stoll(m[1]), int64_t(set.examples.size()));
  EXPECT_EQ(std::stoll(m[2]), set.skipped);
  EXPECT_EQ(std::stoll(m[3]), total.count);
  const double expected = total.sum / double(total.count);
  EXPECT_NEAR(std::stod(m[4]), expected, 1e-4 * expected) << r.output;

  // As plain text the file would be read braces and field names included: refused in one line,
  // naming the formats that read records.
  r = run_meshtrain("eval -m " + dir + " -d " + alpaca + " --seq-len 256 --format text");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("reads '" + alpaca + "' as plain text, braces and field names included"), std::string::npos)
      << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;

  // A chat file needs the Llama 3 special tokens, which this tokenizer lacks: one clear line.
  const std::string chat = dir + "/chat.jsonl";
  std::ofstream(chat) << R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]})"
                      << "\n";
  r = run_meshtrain("eval -m " + dir + " -d " + chat);
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("Llama 3 special tokens"), std::string::npos) << r.output;
  EXPECT_EQ(lines_of(r.output), 1u) << r.output;
}

}  // namespace
