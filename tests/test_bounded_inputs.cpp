// Memory bounded by the input's real size (issue 34, item 5): each input the probe fed meshtrain
// (item 6) on the real binary, under an address-space limit of 1 GiB (prlimit --as) with its peak
// resident memory measured (/usr/bin/time), checking the exit code and the one-line message.
// Was, in the probe: a 150 MB JSON of numbers took 6.5 GB before "no record is a JSON object"
// (2.6 GB as a tokenizer.json); a 2 GB one-line JSON Lines file was read whole before its 64 MiB
// record limit refused it (4.2 GB, and under a 3 GB limit the message stated a wrong size);
// `tokenize` on one 20 MB line took 920 MB, on a 2 GB line 23 GB.
// The generated files are ~100 MB, written and deleted by each test.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/tokenizer.h"
#include "data_fixtures.h"
#include "run_command.h"
#include "temp_dirs.h"

namespace mt {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kMiB = int64_t(1) << 20;
// The address space each run gets: the old readers could not stay inside it.
constexpr int64_t kAddressSpace = 1024 * kMiB;

struct BoundedRun {
  int code = -1;
  std::string output;  // stdout and stderr
  int64_t peak_rss = -1;  // bytes
};

size_t lines_in(const std::string& s) { return size_t(std::count(s.begin(), s.end(), '\n')); }

class BoundedInputs : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::run_command("prlimit --version").code != 0) GTEST_SKIP() << "prlimit (util-linux) not installed";
    if (!fs::exists("/usr/bin/time")) GTEST_SKIP() << "/usr/bin/time (GNU time) not installed";
    dir_ = testing::fresh_temp_dir(std::string("bounded_inputs_") +
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override {
    for (const fs::path& p : written_) fs::remove(p);  // ~100 MB each: not left for the next test
  }

  // Writes `head`, then `body` repeated to make `bytes` bytes, then `tail`; the path.
  std::string write(const std::string& name, const std::string& head, const std::string& body, int64_t bytes,
                    const std::string& tail) {
    const fs::path p = dir_ / name;
    fs::create_directories(p.parent_path());
    std::string block;
    while (int64_t(block.size()) < kMiB) block += body;
    std::ofstream out(p, std::ios::binary);
    out << head;
    for (int64_t n = 0; n < bytes; n += int64_t(block.size()))
      out.write(block.data(), std::min<std::streamsize>(std::streamsize(block.size()), bytes - n));
    out << tail;
    written_.push_back(p);
    return p.string();
  }

  // `meshtrain <args>` in the test's directory under the address-space limit; `stdout_to`, when
  // given, takes its standard output.
  BoundedRun run(const std::string& args, const std::string& stdout_to = "") {
    const fs::path peak = dir_ / "peak_rss.txt";
    const testing::CommandResult r = testing::run_command(
        "(cd " + dir_.string() + " && prlimit --as=" + std::to_string(kAddressSpace) + " /usr/bin/time -o " +
        peak.string() + " -f %M env OMP_NUM_THREADS=1 timeout -k 5 120 " + MESHTRAIN_BINARY + " " + args +
        (stdout_to.empty() ? "" : " > " + stdout_to) + ")");
    BoundedRun out{r.code, r.output, -1};
    std::ifstream in(peak);
    for (std::string line; std::getline(in, line);)  // the last line: GNU time may say the exit code first
      if (!line.empty() && line.find_first_not_of("0123456789") == std::string::npos) out.peak_rss = std::stoll(line) * 1024;
    return out;
  }

  // Refused in one line holding `message`, its peak resident memory under `bound`.
  void expect_refused(const BoundedRun& r, const std::string& message, int64_t bound) {
    EXPECT_NE(r.code, 124) << "still running after 120 s";
    EXPECT_NE(r.code, 0) << r.output.substr(0, 2000);
    EXPECT_NE(r.output.find(message), std::string::npos) << r.output.substr(0, 2000);
    EXPECT_EQ(lines_in(r.output), 1u) << r.output.substr(0, 2000);
    EXPECT_GT(r.peak_rss, 0);
    EXPECT_LT(r.peak_rss, bound) << "peak resident memory " << r.peak_rss / kMiB << " MiB";
  }

  std::string train(const std::string& data) { return "train --data " + data + " --set train.steps=1 --out run"; }

  fs::path dir_;
  std::vector<fs::path> written_;
};

// A sentence of plain prose with digits, punctuation and a contraction.
const std::string kProse =
    "Once upon a time, in 1987, there was a little girl named Lily who didn't like 12345 rainy days; "
    "her friend Tom said: \"Let's look together!\" and they found the ball next to a small dog. ";

// A 100 MB line is refused once 64 MiB of it are read, with the limit stated (never a size it
// has not read); so is a 100 MB element of a JSON array.
TEST_F(BoundedInputs, ARecordOverTheLimitIsRefusedAsItIsRead) {
  const std::string lines = write("long.jsonl", "{\"instruction\": \"", "x", 100 * kMiB, "\", \"output\": \"y\"}\n");
  expect_refused(run(train(lines)),
                 "data file '" + lines + "': line 1 is longer than the 64 MiB limit for a data record", 256 * kMiB);
  fs::remove(lines);
  const std::string array = write("long.json", "[{\"instruction\": \"", "x", 100 * kMiB, "\", \"output\": \"y\"}]");
  expect_refused(run(train(array)),
                 "data file '" + array + "': record 1 (at byte 1) is longer than the 64 MiB limit for a data record",
                 256 * kMiB);
}

// A file of numbers is not a data file: refused at its first record, in either layout.
TEST_F(BoundedInputs, AFileOfNumbersIsRefusedAtItsFirstRecord) {
  const std::string array = write("numbers.json", "[", "1, 2, 3, 4, 5, 6, 7, ", 100 * kMiB, "8]");
  expect_refused(run(train(array)),
                 "data file '" + array + "': record 1 is a number, not a JSON object: a data file holds one object "
                 "per record", 64 * kMiB);
  fs::remove(array);
  const std::string lines = write("numbers.jsonl", "", "1\n2\n3\n", 100 * kMiB, "");
  expect_refused(run(train(lines)), "data file '" + lines + "': line 1 is a number, not a JSON object", 64 * kMiB);
}

// tokenizer.json must be an object: one that starts otherwise is refused before it is parsed.
TEST_F(BoundedInputs, ATokenizerJsonThatIsNotAnObjectIsRefusedBeforeItIsParsed) {
  const std::string tok = write("tok/tokenizer.json", "[", "1, 2, 3, 4, 5, 6, 7, ", 100 * kMiB, "8]");
  expect_refused(run("tokenize --tokenizer " + tok + " --text hi"),
                 tok + ": malformed tokenizer.json: not a JSON object (it starts with '[')", 256 * kMiB);
}

// A tokenize input line over 16 MiB is refused as it is read, naming the line; the lines before
// it are written.
TEST_F(BoundedInputs, ATokenizeLineOverTheLimitIsRefusedAsItIsRead) {
  MT_REQUIRE_DATA("tokenizers/gpt2");
  const std::string input = write("long.txt", "a short first line\n", kProse, 100 * kMiB, "\n");
  expect_refused(run("tokenize --tokenizer " + testdata::data_dir() + "tokenizers/gpt2 --input " + input, "out.jsonl"),
                 input + ":2 is longer than the 16 MiB limit for an input line", 64 * kMiB);
  std::ifstream out(dir_ / "out.jsonl");
  std::string first;
  std::getline(out, first);
  EXPECT_EQ(first.rfind("{\"text\":\"a short first line\",\"ids\":[", 0), 0u) << first;
}

// A 16 MB line is tokenized in parts of ~1 MiB (cli/chunked_encode.h): memory follows the line
// and one part (the old path took ~46 bytes per byte of the line: 740 MB here).
TEST_F(BoundedInputs, ALongTokenizeLineIsEncodedInBoundedMemory) {
  MT_REQUIRE_DATA("tokenizers/gpt2");
  const std::string input = write("long.txt", "", kProse, 16 * kMiB - 4096, "\n");
  const BoundedRun r = run("tokenize --tokenizer " + testdata::data_dir() + "tokenizers/gpt2 --input " + input,
                           "out.jsonl");
  ASSERT_EQ(r.code, 0) << r.output.substr(0, 2000);
  EXPECT_LT(r.peak_rss, 128 * kMiB) << "peak resident memory " << r.peak_rss / kMiB << " MiB";
  const fs::path out = dir_ / "out.jsonl";
  written_.push_back(out);
  std::ifstream in(out, std::ios::binary);
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  EXPECT_FALSE(std::getline(in, line)) << "one line in, one line out";
}

// The parts' ids are the ids of the whole line: a 2.5 MB line (cut twice, inside the prose)
// through the binary against the library's encode() of the whole, for each pre-tokenizer pattern
// (GPT-2, Llama 3 / cl100k, Qwen2 with NFC) and with --specials.
TEST(ChunkedEncode, TheIdsOfALongLineAreThoseOfTheWholeLine) {
  const testing::TempDir dir("chunked_encode");
  std::string text;
  for (int i = 0; text.size() < size_t(5 * kMiB / 2); ++i)
    text += kProse + std::to_string(i) + " caf\xc3\xa9 na\xc3\xafve  double  spaces\t and e\xcc\x81 ";
  const std::string input = dir.file("line.txt", text + "\n");
  for (const std::string rel : {"tokenizers/gpt2", "tokenizers/tiktoken_small/tokenizer.json", "tokenizers/qwen3"}) {
    SCOPED_TRACE(rel);
    if (!fs::exists(testdata::data_dir() + rel)) continue;
    const Tokenizer& tok = testdata::shared_tokenizer(rel);
    for (const std::string flags : {"", " --specials"}) {
      // In a subshell, so that run_command's 2>&1 keeps errors out of the file; appended piece by
      // piece: GCC 12's -Wrestrict misreads one long chain of + here.
      std::string command = "(";
      command += MESHTRAIN_BINARY;
      command += " tokenize --tokenizer " + testdata::data_dir() + rel;
      command += " --input " + input + flags + " > " + dir.path("out.jsonl") + ")";
      const testing::CommandResult r = testing::run_command(command);
      ASSERT_EQ(r.code, 0) << r.output;
      std::ifstream in(dir.path("out.jsonl"));
      const nlohmann::json got = nlohmann::json::parse(in);
      EXPECT_EQ(got["text"], text);
      const std::vector<int32_t> whole = flags.empty() ? tok.encode(text) : tok.encode_with_specials(text);
      EXPECT_EQ(got["ids"].get<std::vector<int32_t>>(), whole);
    }
  }
}

}  // namespace
}  // namespace mt
