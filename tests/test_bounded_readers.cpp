// Bounded readers (issue 24, item 3): every JSON file meshtrain reads goes through one entry point
// (core/bounded_json.h) with a nesting limit and a size limit per kind of file, and data files are
// read one record at a time. Was, in the probe: 150 MB of '[' as a data file took 95 s and 11.1 GB
// of RSS before its error; 20 MB of '[' as config.json, tokenizer.json, adapter_config.json, a
// checkpoint manifest or a metrics line cost ~1.5 GB each. Now each is one line within seconds
// under an address-space limit (prlimit --as) that the old reader could not stay inside. Values
// quoted in messages (TOML's included) are cut to ~100 characters.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>


#include "core/bounded_json.h"
#include "core/error.h"
#include "run_command.h"
#include "train/checkpoint_manifest.h"
#include "temp_dirs.h"

namespace mt {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;

std::string error_of_parse(std::string_view text, JsonKind kind) {
  try {
    parse_json(text, kind, "f.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

size_t lines_in(const std::string& s) { return size_t(std::count(s.begin(), s.end(), '\n')); }

TEST(BoundedJson, DepthScanCountsOnlyBracketsOutsideStrings) {
  EXPECT_EQ(json_depth_exceeded_at("[[1]]", 2), std::string_view::npos);
  EXPECT_EQ(json_depth_exceeded_at("[[[1]]]", 2), 2u);
  EXPECT_EQ(json_depth_exceeded_at(R"({"a": {"b": [1]}})", 2), 12u);
  // Brackets in strings, escaped quotes and escaped backslashes do not count.
  EXPECT_EQ(json_depth_exceeded_at(R"(["[[[[", "\"[[[", "\\", "{{{"])", 1), std::string_view::npos);
  EXPECT_EQ(json_depth_exceeded_at(R"(["\\", [1]])", 1), 7u);
  EXPECT_EQ(json_depth_exceeded_at(std::string(1000, '['), 128), 128u);
}

TEST(BoundedJson, EveryKindRefusesDeepAndOversizedTextInOneLine) {
  const std::string deep(20 << 20, '[');
  for (JsonKind kind : {JsonKind::hf_config, JsonKind::tokenizer, JsonKind::adapter_config,
                        JsonKind::checkpoint_manifest, JsonKind::safetensors_index,
                        JsonKind::safetensors_metadata, JsonKind::run_summary, JsonKind::metrics_line,
                        JsonKind::data_record, JsonKind::hub_api}) {
    const JsonLimits& limits = json_limits(kind);
    SCOPED_TRACE(limits.name);
    const std::string msg = error_of_parse(std::string_view(deep).substr(0, std::min(deep.size(), limits.max_bytes)), kind);
    EXPECT_NE(msg.find("f.json: JSON nested deeper than 128 levels at byte 128"), std::string::npos) << msg;
    EXPECT_TRUE(parse_json_or_discarded(std::string_view(deep).substr(0, 200), kind).is_discarded());
    EXPECT_EQ(parse_json("[[[1]]]", kind, "x")[0][0][0], 1);
  }
  // Over the size limit: refused before the parser sees it.
  std::string big(json_limits(JsonKind::metrics_line).max_bytes + 2, ' ');
  big.front() = '[';
  big.back() = ']';
  const std::string msg = error_of_parse(big, JsonKind::metrics_line);
  EXPECT_NE(msg.find("f.json: 1048578 bytes is over the 1 MiB limit for a metrics.jsonl line"), std::string::npos)
      << msg;
  // nlohmann's own message is kept, cut: an unterminated 10 MB string is not echoed back.
  const std::string unterminated = "{\"a\": \"" + std::string(10 << 20, 'x');
  const std::string cut = error_of_parse(unterminated, JsonKind::tokenizer);
  EXPECT_NE(cut.find("f.json: not valid JSON (at byte"), std::string::npos) << cut.substr(0, 300);
  EXPECT_LT(cut.size(), 400u);
}

// ---------------------------------------------------------------------------------------------
// The real binary on hostile files, each under `timeout` and an address-space limit of 4 GiB
// (prlimit --as): the old readers needed 1.5 GB for 20 MB of '[' and 11 GB for 150 MB.

class HostileFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::run_command("prlimit --version").code != 0) GTEST_SKIP() << "prlimit (util-linux) not installed";
    dir_ = mt::testing::fresh_temp_dir(std::string("bounded_readers_") +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }

  std::string write(const std::string& rel, size_t brackets) {
    const fs::path p = dir_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << std::string(brackets, '[');
    return p.string();
  }
  // Refused in one line naming `fragment`, within 30 s, under the limit.
  void expect_refused(const std::string& args, const std::string& fragment) {
    const auto t0 = std::chrono::steady_clock::now();
    const CommandResult r = testing::run_command("cd " + dir_.string() + " && prlimit --as=" +
                                                 std::to_string(int64_t(4) << 30) +
                                                 " env OMP_NUM_THREADS=1 timeout -k 5 30 " + MESHTRAIN_BINARY + " " +
                                                 args);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_NE(r.code, 124) << args << ": still running after 30 s";
    EXPECT_NE(r.code, 0) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(fragment), std::string::npos) << args << "\n" << r.output.substr(0, 2000);
    EXPECT_EQ(lines_in(r.output), 1u) << args << "\n" << r.output.substr(0, 2000);
    EXPECT_LT(seconds, 30.0);
  }
  fs::path dir_;
};

TEST_F(HostileFiles, DataFileOf150MBOfBracketsIsRefusedAtOnce) {
  const std::string data = write("data.json", size_t(150) << 20);
  expect_refused("train --data " + data + " --set train.steps=1 --out " + (dir_ / "run").string(),
                 "record 1 is nested deeper than 128 levels at byte 129");
  const std::string lines = write("data.jsonl", size_t(150) << 20);
  expect_refused("train --data " + lines + " --set train.steps=1 --out " + (dir_ / "run").string(),
                 "line 1 is longer than the 64 MiB limit for a data record");
}

TEST_F(HostileFiles, EachKindOfJsonFileOf20MBOfBracketsIsRefusedAtOnce) {
  const size_t n = size_t(20) << 20;
  write("model/config.json", n);
  expect_refused("generate -m model -n 1", "model/config.json: 20971520 bytes is over the 16 MiB limit for config.json");
  write("model/config.json", size_t(15) << 20);  // under the size limit: the nesting is refused
  expect_refused("generate -m model -n 1", "model/config.json: JSON nested deeper than 128 levels at byte 128");
  const std::string tok = write("tok/tokenizer.json", n);
  // A tokenizer.json must be an object: refused at its first byte, before the nesting is scanned.
  expect_refused("tokenize --tokenizer " + tok + " --text hi", "not a JSON object (it starts with '[')");
  write("ckpt/manifest.json", n);
  // With its checksum file, as a writer would leave it (without it the manifest is refused first).
  write_manifest_checksum((dir_ / "ckpt").string(), std::string(n, '['));
  expect_refused("export-checkpoint --checkpoint ckpt --out exported",
                 "ckpt/manifest.json: JSON nested deeper than 128 levels");
  // metrics.jsonl: one 20 MB line is not a step's JSON.
  fs::create_directories(dir_ / "run");
  std::ofstream(dir_ / "run" / "metrics.jsonl") << "{\"step\": 1, \"loss\": 2}\n" << std::string(n, '[') << "\n";
  expect_refused("report run", "metrics.jsonl:2: not a step's JSON object");
}

// The adapter reader needs a base model: a 1-step run's.
TEST_F(HostileFiles, AdapterConfigOf20MBOfBracketsIsRefusedAtOnce) {
  const CommandResult r = testing::run_command("OMP_NUM_THREADS=1 " + std::string(MESHTRAIN_BINARY) +
                                               " train --set train.steps=1 --set train.seq_len=32 --out " +
                                               (dir_ / "base").string());
  ASSERT_EQ(r.code, 0) << r.output;
  write("adapter/adapter_config.json", size_t(20) << 20);
  expect_refused("generate -m base/model --adapter adapter -n 1",
                 "adapter/adapter_config.json: 20971520 bytes is over the 16 MiB limit for adapter_config.json");
  write("adapter/adapter_config.json", size_t(15) << 20);
  expect_refused("generate -m base/model --adapter adapter -n 1",
                 "adapter/adapter_config.json: JSON nested deeper than 128 levels at byte 128");
}

// A TOML value of 10 MB (a config file's, and a --set's) is quoted in ~100 characters.
TEST_F(HostileFiles, TomlErrorsQuoteAtMostAHundredCharacters) {
  const std::string huge(10 << 20, 'x');
  std::ofstream(dir_ / "bad_choice.toml") << "[train]\nprecision = \"" << huge << "\"\n";
  std::ofstream(dir_ / "bad_syntax.toml") << "[train]\nsteps = " << huge << "\n";
  std::ofstream(dir_ / "bad_key.toml") << "[train]\n" << huge << " = 1\n";
  std::ofstream(dir_ / "bad_section.toml") << "[" << huge << "]\nx = 1\n";
  // Was: bad_choice echoed the 10 MB value; bad_key ran for minutes (an edit distance from the
  // 10 MB key to every known key, for the "did you mean" hint).
  for (const std::string name : {"bad_choice", "bad_syntax", "bad_key", "bad_section"}) {
    SCOPED_TRACE(name);
    const CommandResult r = testing::run_command("cd " + dir_.string() + " && timeout 30 " + MESHTRAIN_BINARY +
                                                 " train --config " + name + ".toml");
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.code, 124) << "still running after 30 s";
    EXPECT_EQ(lines_in(r.output), 1u) << r.output.substr(0, 500);
    EXPECT_LT(r.output.size(), 600u) << r.output.substr(0, 600);
  }
}

}  // namespace
}  // namespace mt
