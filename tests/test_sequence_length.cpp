// train.seq_len not given: with a model path the length comes from the data (the longest example
// after the template, rounded up to 64, capped at the model's max_position_embeddings and 2048),
// is logged and recorded in run.toml; without one it stays the built-in 128. Through the real
// binary on stories260K (max_position_embeddings 512) made into an HF directory.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "data/examples.h"
#include "data/tokenizer.h"
#include "data_fixtures.h"
#include "run_command.h"
#include "temp_dirs.h"
#include "train/run_config.h"
#include "train/sequence_length.h"

namespace mt {
namespace {

namespace fs = std::filesystem;
using testing::fresh_temp_dir;
using testing::CommandResult;
using testing::run_meshtrain;

// The length a rule-abiding choice gives, written out here rather than through the code under test.
int64_t expected_length(int64_t longest, int64_t limit) {
  return std::min<int64_t>({(longest + 63) / 64 * 64, limit, 2048});
}

TEST(SequenceLength, RoundsUpToSixtyFourAndCaps) {
  EXPECT_EQ(seq_len_for_longest(1, 4096), 64);
  EXPECT_EQ(seq_len_for_longest(64, 4096), 64);
  EXPECT_EQ(seq_len_for_longest(65, 4096), 128);
  EXPECT_EQ(seq_len_for_longest(1031, 512), 512);  // the model's limit
  EXPECT_EQ(seq_len_for_longest(480, 500), 500);   // a limit that is no multiple of 64
  EXPECT_EQ(seq_len_for_longest(5000, 131072), kSeqLenCeiling);
}

TEST(SequenceLength, ConfigTellsALengthGivenFromOneNotGiven) {
  // The built-in run (no model) keeps 128, whether the key is absent, 0 (as configs/tiny.toml
  // writes it) or its default.
  EXPECT_EQ(parse_run_config(default_run_config_toml(), {}).train.seq_len, kBuiltinSeqLen);
  EXPECT_EQ(parse_run_config("", {}).train.seq_len, kBuiltinSeqLen);
  // With a model: 0 when not given (chosen when the run starts), the value when given.
  EXPECT_EQ(parse_run_config(default_run_config_toml(), {"model.path=some/model"}).train.seq_len, 0);
  EXPECT_EQ(parse_run_config("[model]\npath = 'some/model'\n", {}).train.seq_len, 0);
  EXPECT_EQ(parse_run_config("[model]\npath = 'some/model'\n[train]\nseq_len = 256\n", {}).train.seq_len, 256);
  EXPECT_EQ(parse_run_config(default_run_config_toml(), {"model.path=m", "train.seq_len=96"}).train.seq_len, 96);
  EXPECT_THROW(parse_run_config("", {"train.seq_len=-1"}), Error);
}

// Alpaca records whose longest, rendered with the template, is far below the model's 512.
std::string write_short_alpaca(const std::string& dir) {
  const std::string path = dir + "/short.jsonl";
  std::ofstream f(path);
  const std::string answers[] = {"Drink water.", "Sleep well and walk every day in the park with a friend.",
                                 "Eat fruit, vegetables and whole grains; keep sweets for the weekend."};
  for (int i = 0; i < 12; ++i)
    f << R"({"instruction": "Give a health tip.", "input": "", "output": ")" << answers[i % 3] << "\"}\n";
  return path;
}

int64_t longest_example(const std::string& data, const std::string& model_dir) {
  const auto tok = load_tokenizer(model_dir);
  ExampleOptions opt;
  opt.quiet = true;
  int64_t longest = 0;
  for (const Example& ex : read_examples(data, *tok, opt).examples) longest = std::max(longest, int64_t(ex.tokens.size()));
  return longest;
}

std::string recorded_seq_len(const std::string& run_dir) {
  std::ifstream f(run_dir + "/run.toml");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("seq_len = ", 0) == 0) return line.substr(10);
  return "";
}

CommandResult fine_tune(const std::string& model, const std::string& data, const std::string& out,
                        const std::string& extra = "") {
  return run_meshtrain("train --model " + model + " --data " + data + " --lora --out " + out +
                       " --set train.steps=1 --set train.batch_size=2 --set data.cache_dir=off"
                       " --set train.peak_gflops=100 " + extra);
}

TEST(SequenceLength, OneLineFineTuneTakesItsLengthFromTheData) {
  MT_REQUIRE_DATA("stories260K/stories260K.bin");
  const std::string dir = fresh_temp_dir("seqlen_fine_tune");
  const std::string model = testing::stories_hf_dir(dir);
  ASSERT_FALSE(model.empty());
  const std::string data = write_short_alpaca(dir);
  const int64_t longest = longest_example(data, model);
  ASSERT_GT(longest, 20);
  ASSERT_LT(longest, 200);
  const int64_t chosen = expected_length(longest, 512);
  const CommandResult r = fine_tune(model, data, dir + "/run");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("train.seq_len " + std::to_string(chosen) + " from the data: its longest example is " +
                          std::to_string(longest) + " tokens, rounded up to a multiple of 64"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("batch: 2 x " + std::to_string(chosen) + " tokens"), std::string::npos) << r.output;
  // run.toml records the length chosen, so a rerun or resume of the run takes the same one.
  EXPECT_EQ(recorded_seq_len(dir + "/run"), std::to_string(chosen));
  // A length given is taken as given, and nothing is said about choosing one.
  const CommandResult given = fine_tune(model, data, dir + "/given", "--set train.seq_len=320");
  ASSERT_EQ(given.code, 0) << given.output;
  EXPECT_EQ(given.output.find("from the data"), std::string::npos) << given.output;
  EXPECT_EQ(recorded_seq_len(dir + "/given"), "320");
}

TEST(SequenceLength, LongExamplesAreCappedAtTheModelsLimitAndTheWarningStaysUnderIt) {
  MT_REQUIRE_DATA("stories260K/stories260K.bin");
  MT_REQUIRE_DATA("instruct/alpaca_tiny.json");
  const std::string dir = fresh_temp_dir("seqlen_capped");
  const std::string model = testing::stories_hf_dir(dir);
  ASSERT_FALSE(model.empty());
  const std::string data = testdata::data_dir() + "instruct/alpaca_tiny.json";
  const int64_t longest = longest_example(data, model);
  ASSERT_GT(longest, 512);  // this set has examples the model cannot take whole
  const CommandResult r = fine_tune(model, data, dir + "/run");
  ASSERT_EQ(r.code, 0) << r.output;  // with the old default of 128: "no usable records"
  EXPECT_NE(r.output.find("train.seq_len 512 from the data: its longest example is " + std::to_string(longest) +
                          " tokens, capped at the model's max_position_embeddings, 512"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(recorded_seq_len(dir + "/run"), "512");
  // The skip warning names the model's limit instead of a length the model cannot take.
  EXPECT_NE(r.output.find("more than the model's limit of 512: truncate them"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("a sequence length of " + std::to_string(longest)), std::string::npos) << r.output;
  // Below the limit, the warning's suggestion is the limit itself, not the longest example.
  const CommandResult short_rows = fine_tune(model, data, dir + "/short", "--set train.seq_len=256");
  ASSERT_EQ(short_rows.code, 0) << short_rows.output;
  EXPECT_NE(short_rows.output.find("a sequence length of 512 keeps some, or truncate them"), std::string::npos)
      << short_rows.output;
}

TEST(SequenceLength, PlainTextAndTheBuiltInRunKeepTheBuiltInLength) {
  MT_REQUIRE_DATA("stories260K/stories260K.bin");
  const std::string dir = fresh_temp_dir("seqlen_text");
  const std::string model = testing::stories_hf_dir(dir);
  ASSERT_FALSE(model.empty());
  std::string text;
  while (text.size() < 6000) text += "Once upon a time there was a little dog who liked to run in the park. ";
  std::ofstream(dir + "/story.txt") << text;
  CommandResult r = fine_tune(model, dir + "/story.txt", dir + "/run");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("train.seq_len 128: plain text has no examples to measure"), std::string::npos) << r.output;
  EXPECT_EQ(recorded_seq_len(dir + "/run"), "128");
  // No model path: the built-in run's 128, chosen from nothing and so not announced.
  r = run_meshtrain("train --out " + dir + "/builtin --set train.steps=1 --set train.peak_gflops=100");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("batch: 8 x 128 tokens"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("train.seq_len 1"), std::string::npos) << r.output;
  EXPECT_EQ(recorded_seq_len(dir + "/builtin"), "128");
}

}  // namespace
}  // namespace mt
