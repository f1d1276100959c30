// The meshtrain binary as a user runs it: bad input gives one clear line and a non-zero exit.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <sys/stat.h>

#include "io/hf_config.h"
#include "run_command.h"
#include "train/config_schema.h"
#include "train/config_values.h"
#include "temp_dirs.h"

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

// Found by the CLI fuzz target (fuzz/fuzz_cli.cpp): an argument with a line break was echoed raw
// into CLI11's message, and a path with one into an mt::Error, each then two lines. The break is
// written as \n, the message one line.
TEST(Cli, AnArgumentWithALineBreakIsEchoedOnOneLine) {
  expect_one_line_error("train \"$(printf 'stray\\nargument')\"", "stray\\nargument");
  expect_one_line_error("train --set \"data.path=$(printf 'no\\nsuch\\tfile')\"", "no\\nsuch\\tfile");
}

// Also the fuzz target's: CLI11 quoted an unexpected argument of 5000 bytes whole.
TEST(Cli, AnUnexpectedLongArgumentIsQuotedShort) {
  const Result r = run("shard " + std::string(5000, 'a'));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("aaa... ("), std::string::npos) << r.output;
  EXPECT_LT(r.output.size(), 500u) << r.output;
}

// Under mpirun every rank meets a configuration error before MPI starts; it is said once, by rank 0
// (it was said by each rank). An error of one rank alone is still said, naming that rank.
TEST(Cli, UnderMpirunAConfigErrorIsSaidOnceAndAOneRankErrorNamesItsRank) {
  const std::string mpirun = "OMP_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe -n 2 ";
  if (mt::testing::run_command("mpirun --version").code != 0) GTEST_SKIP() << "no mpirun";
  auto error_lines = [](const std::string& output) {
    std::vector<std::string> found;
    for (size_t at = output.find("meshtrain: error"); at != std::string::npos;
         at = output.find("meshtrain: error", at + 1))
      found.push_back(output.substr(at, output.find('\n', at) - at));
    return found;
  };
  const Result both = mt::testing::run_command(mpirun + MESHTRAIN_BINARY + " train --set train.stpes=3");
  EXPECT_NE(both.code, 0);
  const auto said = error_lines(both.output);
  ASSERT_EQ(said.size(), 1u) << both.output;
  EXPECT_EQ(said[0].rfind("meshtrain: error [rank 0/2]: --set train.stpes=3: unknown key", 0), 0u) << both.output;

  const std::string scratch = mt::testing::fresh_temp_dir("cli_one_rank_error");
  const Result one = mt::testing::run_command(
      mpirun + "sh -c 'if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then exec " + MESHTRAIN_BINARY +
      " train --set train.stpes=3; else exec " + MESHTRAIN_BINARY + " train --set train.steps=1 --out " + scratch +
      "/run; fi'");
  EXPECT_NE(one.code, 0);
  const auto said_one = error_lines(one.output);
  ASSERT_EQ(said_one.size(), 1u) << one.output;
  EXPECT_EQ(said_one[0].rfind("meshtrain: error [rank 1/2]: --set train.stpes=3", 0), 0u) << one.output;
}

// The ping-pong has no peer on one process (its two-rank path runs in the ctest pp_bench_quick).
TEST(Cli, BenchP2pOnOneRankIsRefused) {
  expect_one_line_error("bench --what p2p", "needs two ranks (mpirun -n 2");
}

// bench's training path on a small cut (given a peak, so no GEMM sweep): it trains, prints its
// figures and the GEMM roofline, and writes them to --json, the roofline's share consistent with
// the tokens/s and the GEMMs' time (a share of the step, so at most the whole of it).
TEST(Cli, BenchTrainsAndReportsItsGemmRoofline) {
  const std::string json = mt::testing::fresh_temp_dir("cli_bench") + "/bench.json";
  Result r = run("bench --what lora --preset qwen3-0.6b --layers 1 --batch 1 --seq 32 --steps 1 --peak-gflops 100 --json " +
                 json);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("GEMM roofline: the GEMMs took"), std::string::npos) << r.output;
  std::ifstream f(json);
  const auto j = nlohmann::json::parse(f);
  const auto& lora = j.at("lora");
  const double tps = lora.at("tokens_per_s"), roof = lora.at("gemm_roofline_tokens_per_s");
  const double share = lora.at("share_of_gemm_roofline"), gemm_ms = lora.at("gemm_ms_per_step");
  EXPECT_GT(tps, 0.0);
  EXPECT_GT(gemm_ms, 0.0);
  EXPECT_LE(gemm_ms, double(lora.at("ms_per_step")));
  EXPECT_GE(roof, tps);
  EXPECT_NEAR(share, tps / roof, 1e-9);
  EXPECT_NEAR(roof, 32.0 / (gemm_ms / 1e3), 1e-6 * roof);
}

TEST(Cli, TrainsAndSummarises) {
  Result r = run("train --set train.steps=3 --set train.log_every=1 --set train.peak_gflops=100 "
                 "--set output.dir=" + mt::testing::fresh_temp_dir("cli_run") + "/run");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("step 3/3"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tok/s"), std::string::npos);
  EXPECT_NE(r.output.find("MFU"), std::string::npos);
  EXPECT_NE(r.output.find("metrics.jsonl"), std::string::npos);
  EXPECT_NE(r.output.find("model.safetensors"), std::string::npos);
}

// `meshtrain train --help` lists every config key with its default.
TEST(Cli, TrainHelpListsEveryKeyWithItsDefault) {
  Result r = run("train --help");
  ASSERT_EQ(r.code, 0) << r.output;
  const mt::RunConfig defaults;
  for (const mt::ConfigKey& key : mt::config_keys()) {
    const std::string line = "  " + std::string(key.name) + " = " + mt::config_value_toml(key, defaults);
    EXPECT_NE(r.output.find(line), std::string::npos) << "missing: " << line << "\n" << r.output;
  }
}

// A reader given a FIFO waits forever for a writer, and one given /dev/zero never reaches the end:
// both must be refused at once with one line naming the path. `timeout` bounds each run so that a
// regression fails (exit 124) instead of hanging the suite.
void expect_refused_quickly(const std::string& args, const std::string& path) {
  const Result r = mt::testing::run_command("timeout -k 5 30 " + std::string(MESHTRAIN_BINARY) + " " + args);
  ASSERT_NE(r.code, 124) << args << ": still reading after 30 s";
  EXPECT_NE(r.code, 0) << args;
  EXPECT_NE(r.output.find(path), std::string::npos) << args << "\n" << r.output;
  EXPECT_NE(r.output.find("not a regular file"), std::string::npos) << args << "\n" << r.output;
  size_t lines = 0;
  for (char c : r.output) lines += c == '\n';
  EXPECT_EQ(lines, 1u) << args << "\n" << r.output;
}

TEST(Cli, NonRegularFilesAreRefusedNotRead) {
  namespace fs = std::filesystem;
  const fs::path dir = mt::testing::fresh_temp_dir("cli_fifo");
  fs::create_directories(dir / "model");
  const std::string fifo = (dir / "input.fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // An HF model directory whose config.json, or whose weights, are a FIFO.
  ASSERT_EQ(::mkfifo((dir / "model" / "config.json").c_str(), 0600), 0);
  fs::create_directories(dir / "weights");
  std::ofstream(dir / "weights" / "config.json") << mt::hf_config_json(mt::ModelConfig{}, "bfloat16");
  ASSERT_EQ(::mkfifo((dir / "weights" / "model.safetensors").c_str(), 0600), 0);

  for (const std::string& special : {fifo, std::string("/dev/zero")}) {
    expect_refused_quickly("train --config " + special, special);
    expect_refused_quickly("train --set data.path=" + special, special);
    // Examples go through the token cache, or straight to the reader with the cache off.
    expect_refused_quickly("train --set data.path=" + special + " --set data.format=alpaca", special);
    expect_refused_quickly("train --set data.path=" + special + " --set data.format=alpaca --set data.cache_dir=off",
                           special);
    expect_refused_quickly("generate -m " + special + " -n 1", special);
    expect_refused_quickly("tokenize --tokenizer " + special + " --text hi", special);
  }
  expect_refused_quickly("generate -m " + (dir / "model").string() + " -n 1", "config.json");
  expect_refused_quickly("generate -m " + (dir / "weights").string() + " -n 1", "model.safetensors");
}

// `generate -t nan` used to exit 0 having printed nothing; the options are checked before the
// model is loaded, so no model is needed to see the refusal.
TEST(Cli, NonFiniteSamplingOptionsAreRefused) {
  expect_one_line_error("generate -m /nonexistent/model -t nan", "temperature");
  expect_one_line_error("generate -m /nonexistent/model -t 1 --top-p nan", "top_p");
}

// The per-step losses in a run's metrics.jsonl, exactly as written.
std::vector<std::string> losses_of(const std::string& dir) {
  std::ifstream in(dir + "/metrics.jsonl");
  EXPECT_TRUE(in) << dir;
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains("step") && j.contains("loss")) out.push_back(j["loss"].dump());
  }
  return out;
}

// The run.toml a run writes is a full record: training again from it gives the same losses.
TEST(Cli, RunTomlRepeatsTheRun) {
  const std::string text = std::string(MESHTRAIN_SOURCE_DIR) + "/../shared/data/text/tinyshakespeare.txt";
  if (!std::filesystem::exists(text)) GTEST_SKIP() << "shared data not present";
  const std::string scratch = mt::testing::fresh_temp_dir("cli_repeat");
  const std::string first = scratch + "/first", again = scratch + "/again";
  // Keys away from the built-in run's values, so that a key run.toml lost would show.
  Result r = run("train --set data.path=" + text + " --set data.cache_dir=off "
                 "--set train.steps=4 --set train.batch_size=2 --set train.grad_accum=2 "
                 "--set train.seq_len=64 --set train.seed=99 --set train.precision=fp32 "
                 "--set train.log_every=1 --set train.peak_gflops=100 --set optim.lr=3e-3 "
                 "--set optim.warmup_steps=1 --set optim.grad_clip=0.5 --set model.hidden_size=64 "
                 "--set model.intermediate_size=160 --set model.num_hidden_layers=2 "
                 "--set data.val_fraction=0.02 --set output.dir=" + first);
  ASSERT_EQ(r.code, 0) << r.output;
  r = run("train --config " + first + "/run.toml --set output.dir=" + again);
  ASSERT_EQ(r.code, 0) << r.output;
  const std::vector<std::string> expected = losses_of(first);
  ASSERT_EQ(expected.size(), 4u);
  EXPECT_EQ(losses_of(again), expected);
}

}  // namespace

namespace {

// The real-model path a user takes: convert stories260K, generate, evaluate, export.
TEST(Cli, ConvertGenerateEvalExportStories260K) {
  const std::string data = std::string(MESHTRAIN_SOURCE_DIR) + "/../shared/data/";
  if (FILE* f = fopen((data + "stories260K/stories260K.bin").c_str(), "rb")) fclose(f);
  else GTEST_SKIP() << "shared data not present";
  const std::string dir = mt::testing::fresh_temp_dir("cli_stories") + "/model";
  Result r = run("convert --llama2c " + data + "stories260K/stories260K.bin --tokenizer " + data +
                 "stories260K/tok512.bin --out " + dir);
  ASSERT_EQ(r.code, 0) << r.output;
  // A complete HF directory: generate below reads its tokenizer.json (load_tokenizer prefers it).
  for (const char* f : {"tokenizer.bin", "tokenizer.json", "tokenizer_config.json"})
    EXPECT_TRUE(std::filesystem::is_regular_file(dir + "/" + f)) << f;
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
  EXPECT_EQ(r.output.find("no tokenizer.ggml"), std::string::npos) << r.output;  // GGUF got the vocabulary
  for (const char* f : {"tokenizer.bin", "tokenizer.json", "tokenizer_config.json"})
    EXPECT_TRUE(std::filesystem::is_regular_file(dir + "_merged/" + f)) << f;
  r = run("generate -m " + dir + "_merged -n 10");
  EXPECT_EQ(r.code, 0) << r.output;
  expect_one_line_error("generate -m /nonexistent/model -n 3", "/nonexistent/model");
  expect_one_line_error("export -m " + dir, "nothing to do");
}

}  // namespace
