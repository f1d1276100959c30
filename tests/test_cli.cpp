// The meshtrain binary as a user runs it: bad input gives one clear line and a non-zero exit.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>
#include "run_command.h"

namespace {

using Result = mt::testing::CommandResult;
Result run(const std::string& args) { return mt::testing::run_meshtrain(args); }

void expect_one_line_error(const std::string& args, const std::string& must_name) {
  Result r = run(args);
  EXPECT_NE(r.code, 0) << args;
  EXPECT_NE(r.output.find(must_name), std::string::npos) << args << "\n" << r.output;
  size_t lines = 0;
  for (char c : r.output) lines += c == '\n';
  EXPECT_EQ(lines, 1u) << args << "\n" << r.output;
}

TEST(Cli, BadConfigGivesOneLineNamingTheKey) {
  expect_one_line_error("train --set train.stpes=3", "train.stpes");
  expect_one_line_error("train --set train.steps='\"ten\"'", "train.steps");
  expect_one_line_error("train --set model.num_attention_heads=5", "num_attention_heads");
  expect_one_line_error("train --set model.num_key_value_heads=3", "num_key_value_heads");
  expect_one_line_error("train --set lora.enabled=true --set lora.rank=0", "lora.rank");
  expect_one_line_error("train --set bogus.key=1", "bogus");
  expect_one_line_error("train --set model.vocab_size=100", "vocab_size");
}

TEST(Cli, MissingFilesAreNamed) {
  expect_one_line_error("train --set data.path=/nonexistent/corpus.txt", "/nonexistent/corpus.txt");
  Result r = run("train --config /nonexistent/run.toml");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("/nonexistent/run.toml"), std::string::npos) << r.output;
}

TEST(Cli, TrainsAndSummarises) {
  Result r = run("train --set train.steps=3 --set train.log_every=1 --set train.peak_gflops=100 "
                 "--set output.dir=" + std::string(::testing::TempDir()) + "meshtrain_cli_run");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("step 3/3"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tok/s"), std::string::npos);
  EXPECT_NE(r.output.find("MFU"), std::string::npos);
  EXPECT_NE(r.output.find("metrics.jsonl"), std::string::npos);
  EXPECT_NE(r.output.find("model.safetensors"), std::string::npos);
}

}  // namespace

namespace {

// The real-model path a user takes: convert stories260K, generate, evaluate, export.
TEST(Cli, ConvertGenerateEvalExportStories260K) {
  const std::string data = std::string(MESHTRAIN_SOURCE_DIR) + "/../shared/data/";
  if (FILE* f = fopen((data + "stories260K/stories260K.bin").c_str(), "rb")) fclose(f);
  else GTEST_SKIP() << "shared data not present";
  const std::string dir = std::string(::testing::TempDir()) + "meshtrain_cli_stories";
  Result r = run("convert --llama2c " + data + "stories260K/stories260K.bin --tokenizer " + data +
                 "stories260K/tok512.bin --out " + dir);
  ASSERT_EQ(r.code, 0) << r.output;
  r = run("generate -m " + dir + " -n 40");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("Once upon a time, there was a little girl named Lily.", 0), 0u) << r.output;
  const std::string text = dir + "_eval.txt";
  ASSERT_EQ(std::system(("head -c 20000 " + data + "text/tinyshakespeare.txt > " + text).c_str()), 0);
  r = run("eval -m " + dir + " -d " + text + " --seq-len 64 --batch 4");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("perplexity"), std::string::npos) << r.output;
  r = run("export -m " + dir + " --merged " + dir + "_merged --gguf " + dir + ".gguf");
  ASSERT_EQ(r.code, 0) << r.output;
  r = run("generate -m " + dir + "_merged -n 10");
  EXPECT_EQ(r.code, 0) << r.output;
  expect_one_line_error("generate -m /nonexistent/model -n 3", "/nonexistent/model");
  expect_one_line_error("export -m " + dir, "nothing to do");
}

}  // namespace
