// The tokenised cache: round trip, no re-tokenising on a hit, invalidation, corrupt files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "data/byte_tokenizer.h"
#include "data/token_cache.h"
#include "data_fixtures.h"

namespace mt {
namespace {

using namespace mt::testdata;

std::string good_jsonl(int n) {
  std::string s;
  for (int i = 0; i < n; ++i)
    s += R"({"instruction": "Repeat )" + std::to_string(i) + R"(.", "output": "Number )" +
         std::to_string(i) + "\"}\n";
  return s;
}

void expect_same(const ExampleTable& a, const ExampleTable& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    Example x = a.example(i), y = b.example(i);
    EXPECT_EQ(x.tokens, y.tokens) << i;
    EXPECT_EQ(x.trained, y.trained) << i;
  }
}

int64_t fingerprint_calls(const Tokenizer& inner) {
  CountingTokenizer t(inner);
  tokenizer_fingerprint(t);
  return t.calls;
}

TEST(DatasetTokenCache, SecondLoadDoesNotTokenise) {
  TempDir dir("cache_hit");
  const std::string data = dir.file("d.jsonl", good_jsonl(30) + R"({"instruction": "no output"})" "\n");
  ByteTokenizer byte;
  CountingTokenizer tok(byte);
  ExampleOptions opt;
  opt.quiet = true;
  LoadedExamples first = load_examples(data, tok, opt, dir.path("cache"));
  EXPECT_FALSE(first.from_cache);
  EXPECT_GT(tok.calls, 30);
  ASSERT_FALSE(first.cache_path.empty());
  EXPECT_TRUE(std::filesystem::exists(first.cache_path));
  EXPECT_EQ(first.cache_path.rfind(dir.path("cache/d-"), 0), 0u) << first.cache_path;
  EXPECT_EQ(first.skipped, 1);

  tok.calls = 0;
  LoadedExamples second = load_examples(data, tok, opt, dir.path("cache"));
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(tok.calls, fingerprint_calls(byte));  // only the fingerprint probes
  EXPECT_EQ(second.format, DataFormat::kAlpaca);
  EXPECT_EQ(second.records, 31);
  EXPECT_EQ(second.skipped, 1);
  EXPECT_EQ(second.warning, first.warning);
  expect_same(first.table, second.table);
  ExampleSet direct = read_examples(data, byte, opt);
  expect_same(second.table, ExampleTable(direct.examples));
}

TEST(DatasetTokenCache, KeyFollowsDataOptionsAndTokenizer) {
  MT_REQUIRE_DATA("tokenizers/tiktoken_small/tokenizer.model");
  TempDir dir("cache_key");
  const std::string data = dir.file("d.jsonl", good_jsonl(5));
  ByteTokenizer byte;
  const Tokenizer& small = shared_tokenizer("tokenizers/tiktoken_small/tokenizer.model");
  ExampleOptions opt;
  const std::string c = dir.path("cache");
  const std::string base = cache_file_for(data, byte, opt, c);
  EXPECT_EQ(cache_file_for(data, byte, opt, c), base);
  EXPECT_NE(cache_file_for(data, small, opt, c), base);
  ExampleOptions longer = opt;
  longer.max_tokens = 512;
  EXPECT_NE(cache_file_for(data, byte, longer, c), base);
  ExampleOptions chat = opt;
  chat.format = DataFormat::kChat;
  EXPECT_NE(cache_file_for(data, byte, chat, c), base);
  dir.file("d.jsonl", good_jsonl(6));  // new size (and mtime)
  EXPECT_NE(cache_file_for(data, byte, opt, c), base);
}

TEST(DatasetTokenCache, CorruptOrTruncatedCacheIsRebuilt) {
  TempDir dir("cache_corrupt");
  const std::string data = dir.file("d.jsonl", good_jsonl(20));
  ByteTokenizer byte;
  ExampleOptions opt;
  LoadedExamples good = load_examples(data, byte, opt, dir.path("cache"));
  const std::string file = good.cache_path;
  const auto size = std::filesystem::file_size(file);

  {  // flip one token byte
    std::fstream f(file, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(std::streamoff(size - 40));
    f.put('\x7f');
  }
  ::testing::internal::CaptureStderr();
  LoadedExamples rebuilt = load_examples(data, byte, opt, dir.path("cache"));
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(rebuilt.from_cache);
  EXPECT_NE(err.find("checksum mismatch"), std::string::npos) << err;
  EXPECT_NE(err.find(file), std::string::npos) << err;
  expect_same(rebuilt.table, good.table);

  std::filesystem::resize_file(file, size / 2);
  ::testing::internal::CaptureStderr();
  rebuilt = load_examples(data, byte, opt, dir.path("cache"));
  err = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(rebuilt.from_cache);
  EXPECT_NE(err.find("re-tokenising"), std::string::npos) << err;

  std::filesystem::resize_file(file, 10);
  ::testing::internal::CaptureStderr();
  rebuilt = load_examples(data, byte, opt, dir.path("cache"));
  err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("shorter than its header"), std::string::npos) << err;

  LoadedExamples again = load_examples(data, byte, opt, dir.path("cache"));
  EXPECT_TRUE(again.from_cache);
  expect_same(again.table, good.table);
}

TEST(DatasetTokenCache, OffDisablesCaching) {
  TempDir dir("cache_off");
  const std::string data = dir.file("d.jsonl", good_jsonl(3));
  ByteTokenizer byte;
  LoadedExamples a = load_examples(data, byte, {}, "off");
  EXPECT_FALSE(a.from_cache);
  EXPECT_TRUE(a.cache_path.empty());
  EXPECT_EQ(a.table.size(), 3u);
}

}  // namespace
}  // namespace mt
