// The meshtrain binary as a user runs it: bad input gives one clear line and a non-zero exit.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <string>
#include <sys/wait.h>

namespace {

struct Result {
  int code;
  std::string output;
};

Result run(const std::string& args) {
  std::string cmd = std::string(MESHTRAIN_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

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
