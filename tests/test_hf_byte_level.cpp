// HF tokenizer.json for the byte-level tokenizers (hf_byte_level_writer.h): the files
// save_tokenizer_files writes for the byte tokenizer, tiktoken (tiktoken_small, Llama 3) and
// GPT-2's vocab.json + merges.txt read back through meshtrain's HF reader and encode every tricky
// string exactly as their source does; tiktoken_small's written file has the vocab and merges of
// the HF file of the same tokenizer that HF's converter wrote.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "data/byte_tokenizer.h"
#include "data/hf_byte_level_writer.h"
#include "data/tokenizer.h"
#include "data/tokenizer_files.h"
#include "data/tokenizer_readers.h"
#include "data_fixtures.h"
#include "text_files.h"

namespace mt {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testdata::TempDir;

using testing::read_file;

// Strings where pre-tokenizers, merges and the byte mapping tend to go wrong.
std::vector<std::string> tricky_strings() {
  std::vector<std::string> s = {
      "",
      "Hello world",
      "I'm sure you'RE fine, they'll've it's 'S",
      "First Citizen:\nBefore we proceed any further, hear me speak.\r\n\r\nAll:\tSpeak, speak.",
      "   leading and trailing spaces   ",
      "\n\n\n  \t \n x",
      "1234567890 3.14159 1,000,000",
      "\xE4\xB8\xAD\xE6\x96\x87\xE5\xAD\x97\xE7\xAC\xA6 \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E",  // CJK
      "emoji \xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD!",
      "ca\xCC\x81" "fe\xCC\x81 \xEF\xAC\x81 \xC5\xBF's",  // combining marks, ligature, long s
      "invalid \xFF\xFE \xC3( \xE2\x82 \xED\xA0\x80 end\x80",
      "specials as text: <|begin_of_text|> <|endoftext|> <|eot_id|>",
      "def f(x):\n    return x**2  # comment\n",
      std::string("nul\0byte", 8),
  };
  std::mt19937 rng(17);
  std::string random_bytes;
  for (int i = 0; i < 4000; ++i) random_bytes += char(rng() & 0xFF);
  s.push_back(random_bytes);
  std::string all_bytes;
  for (int b = 0; b < 256; ++b) all_bytes += char(b);
  s.push_back(all_bytes);
  return s;
}

void expect_same_encodings(const Tokenizer& want, const Tokenizer& got, const std::string& what) {
  for (const std::string& text : tricky_strings()) {
    EXPECT_EQ(got.encode(text), want.encode(text)) << what << ": " << json(text).dump(-1, ' ', true, json::error_handler_t::replace);
    EXPECT_EQ(got.encode_with_specials(text), want.encode_with_specials(text)) << what;
  }
}

TEST(HfByteLevel, ByteTokenizerGetsHfFilesAndStillLoadsAsItself) {
  TempDir dir("hf_byte_level_byte");
  const auto written = save_tokenizer_files("", dir.path());
  ASSERT_EQ(written.size(), 3u);
  for (const char* f : {"tokenizer.byte", "tokenizer.json", "tokenizer_config.json"})
    EXPECT_TRUE(fs::is_regular_file(dir.path(f))) << f;
  // The marker wins over tokenizer.json: the directory is the byte tokenizer itself.
  EXPECT_EQ(load_tokenizer(dir.path())->kind(), "byte");

  const std::string text = read_file(dir.path("tokenizer.json"));
  const json doc = json::parse(text);
  EXPECT_EQ(doc["pre_tokenizer"]["type"], "ByteLevel");
  EXPECT_EQ(doc["pre_tokenizer"]["use_regex"], false);
  EXPECT_EQ(doc["pre_tokenizer"]["add_prefix_space"], false);
  EXPECT_EQ(doc["decoder"]["type"], "ByteLevel");
  EXPECT_EQ(doc["model"]["vocab"].size(), 256u);
  EXPECT_EQ(doc["model"]["vocab"]["\xC4\xA0"], 32);  // "Ġ" is the space byte
  EXPECT_EQ(doc["model"]["vocab"]["A"], 65);
  EXPECT_TRUE(doc["model"]["merges"].empty());
  EXPECT_TRUE(doc["added_tokens"].empty());

  auto hf = read_hf_tokenizer_json(text, "tokenizer.json");
  const ByteTokenizer byte;
  EXPECT_EQ(hf->vocab_size(), 256);
  expect_same_encodings(byte, *hf, "byte tokenizer.json");
  for (int b = 0; b < 256; ++b) EXPECT_EQ(hf->encode(std::string(1, char(b))), std::vector<int32_t>{b});
  const std::string bad = "\xFF\xC3\x28\x80";
  EXPECT_EQ(hf->decode(hf->encode(bad)), bad);

  const json cfg = json::parse(read_file(dir.path("tokenizer_config.json")));
  EXPECT_TRUE(cfg["bos_token"].is_null());
  EXPECT_TRUE(cfg["eos_token"].is_null());
  EXPECT_EQ(cfg["tokenizer_class"], "PreTrainedTokenizerFast");
}

TEST(HfByteLevel, TiktokenSmallMatchesHfsOwnFileOfIt) {
  MT_REQUIRE_DATA("tokenizers/tiktoken_small/tokenizer.json");
  TempDir dir("hf_byte_level_tiktoken_small");
  const std::string src = testdata::data_dir() + "tokenizers/tiktoken_small/";
  const auto written = save_tokenizer_files(src + "tokenizer.model", dir.path());
  EXPECT_EQ(written.size(), 3u);
  for (const char* f : {"tokenizer.model", "tokenizer.json", "tokenizer_config.json"})
    EXPECT_TRUE(fs::is_regular_file(dir.path(f))) << f;

  const std::string text = read_file(dir.path("tokenizer.json"));
  const json mine = json::parse(text), hfs = json::parse(read_file(src + "tokenizer.json"));
  EXPECT_EQ(mine["model"]["vocab"], hfs["model"]["vocab"]);
  EXPECT_EQ(mine["model"]["ignore_merges"], true);
  EXPECT_EQ(mine["pre_tokenizer"], hfs["pre_tokenizer"]);
  // HF's file lists merges as pairs, meshtrain's as "a b" strings (which every tokenizers
  // version reads); the lists are the same.
  const json& merges = mine["model"]["merges"];
  ASSERT_EQ(merges.size(), hfs["model"]["merges"].size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& pair = hfs["model"]["merges"][i];
    ASSERT_EQ(merges[i], pair[0].get<std::string>() + " " + pair[1].get<std::string>()) << "merge " << i;
  }
  EXPECT_EQ(mine["added_tokens"].size(), 256u);
  EXPECT_EQ(mine["added_tokens"][0]["content"], "<|begin_of_text|>");
  EXPECT_EQ(mine["added_tokens"][0]["id"], 2000);
  EXPECT_EQ(mine["post_processor"]["type"], "TemplateProcessing");

  auto source = load_tokenizer(src + "tokenizer.model");
  auto back = read_hf_tokenizer_json(text, "tokenizer.json");
  EXPECT_EQ(back->vocab_size(), source->vocab_size());
  EXPECT_EQ(back->bos_id(), source->bos_id());
  EXPECT_EQ(back->eos_id(), source->eos_id());
  expect_same_encodings(*source, *back, "written tokenizer.json");
  expect_same_encodings(*source, *load_tokenizer(dir.path()), "written directory");
  auto hf_own = load_tokenizer(src + "tokenizer.json");
  for (const std::string& s : tricky_strings()) EXPECT_EQ(back->encode(s), hf_own->encode(s));

  const json cfg = json::parse(read_file(dir.path("tokenizer_config.json")));
  EXPECT_EQ(cfg["bos_token"], "<|begin_of_text|>");
  EXPECT_EQ(cfg["eos_token"], "<|end_of_text|>");
  EXPECT_EQ(cfg["added_tokens_decoder"]["2009"]["content"], "<|eot_id|>");
}

TEST(HfByteLevel, Llama3ConvertsInSecondsAndEncodesAlike) {
  MT_REQUIRE_DATA("tokenizers/llama3/tokenizer.model");
  const Tokenizer& source = testdata::shared_tokenizer("tokenizers/llama3/tokenizer.model");
  const auto start = std::chrono::steady_clock::now();
  const std::string text = hf_byte_level_tokenizer_json(dynamic_cast<const BpeTokenizer&>(source));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 5.0) << "writing Llama 3's tokenizer.json";
  auto back = read_hf_tokenizer_json(text, "tokenizer.json");
  EXPECT_EQ(back->vocab_size(), 128256);
  EXPECT_EQ(back->bos_id(), 128000);
  EXPECT_EQ(back->eos_id(), 128001);
  expect_same_encodings(source, *back, "Llama 3 tokenizer.json");
}

TEST(HfByteLevel, Gpt2PairGetsTokenizerJson) {
  MT_REQUIRE_DATA("tokenizers/gpt2/vocab.json");
  TempDir dir("hf_byte_level_gpt2");
  const std::string src = testdata::data_dir() + "tokenizers/gpt2";
  const auto written = save_tokenizer_files(src, dir.path());
  EXPECT_EQ(written.size(), 4u);
  for (const char* f : {"vocab.json", "merges.txt", "tokenizer.json", "tokenizer_config.json"})
    EXPECT_TRUE(fs::is_regular_file(dir.path(f))) << f;
  const std::string text = read_file(dir.path("tokenizer.json"));
  const json doc = json::parse(text);
  // The merges keep merges.txt's order.
  std::istringstream merges_txt(read_file(src + "/merges.txt"));
  std::string line;
  size_t n = 0;
  while (std::getline(merges_txt, line)) {
    if (line.empty() || line.rfind("#version", 0) == 0) continue;
    ASSERT_LT(n, doc["model"]["merges"].size());
    ASSERT_EQ(doc["model"]["merges"][n], line) << "merge " << n;
    ++n;
  }
  EXPECT_EQ(n, doc["model"]["merges"].size());
  EXPECT_TRUE(doc["post_processor"].is_null());

  auto source = load_tokenizer(src);
  auto back = read_hf_tokenizer_json(text, "tokenizer.json");
  EXPECT_EQ(back->vocab_size(), source->vocab_size());
  EXPECT_EQ(back->bos_id(), 50256);
  EXPECT_EQ(back->eos_id(), 50256);
  expect_same_encodings(*source, *back, "GPT-2 tokenizer.json");
  const json cfg = json::parse(read_file(dir.path("tokenizer_config.json")));
  EXPECT_EQ(cfg["bos_token"], "<|endoftext|>");
  EXPECT_EQ(cfg["add_bos_token"], false);
}

}  // namespace
}  // namespace mt
