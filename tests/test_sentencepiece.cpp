// Sentencepiece BPE from tokenizer.model (protobuf), against python3-sentencepiece's ids for a
// corpus of tricky strings (tests/data/sentencepiece/reference_ids.json, made with the fixtures
// by scripts/make_spm_fixtures.sh), round trips, and the models and files it refuses.
#include <gtest/gtest.h>

#include "run_command.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "core/error.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/tokenizer.h"
#include "data/tokenizer_readers.h"
#include "sentencepiece_fixtures.h"
#include "text_files.h"
#include "temp_dirs.h"

namespace mt {
namespace {

namespace fs = std::filesystem;
using Ids = std::vector<int32_t>;

using ::mt::testing::read_file, ::mt::testing::spm::fixture, ::mt::testing::spm::shared;
const nlohmann::json& reference() {
  static const nlohmann::json ref = nlohmann::json::parse(read_file(fixture("reference_ids.json")));
  return ref;
}
// The model file of each reference entry (tok512.model is llama2.c's, in the shared data).
std::string model_path(const std::string& file) {
  return file == "tok512.model" ? shared("stories260K/tok512.model") : fixture(file);
}

TEST(SentencePieceModel, MatchesPythonSentencepiece) {
  const auto& ref = reference();
  const auto& strings = ref["strings"];
  ASSERT_GT(strings.size(), 100u);
  int models = 0;
  for (const auto& [file, expect] : ref["models"].items()) {
    if (!fs::exists(model_path(file))) continue;  // shared data missing
    ++models;
    auto tok = load_tokenizer(model_path(file));
    EXPECT_EQ(tok->kind(), "sentencepiece");
    for (size_t i = 0; i < strings.size(); ++i) {
      const std::string s = strings[i].get<std::string>();
      Ids ids = tok->encode(s);
      EXPECT_EQ(ids, expect["ids"][i].get<Ids>()) << file << " string " << i << ": '" << s << "'";
      EXPECT_EQ(tok->decode(ids), expect["decoded"][i].get<std::string>()) << file << " string " << i;
    }
  }
  EXPECT_GE(models, 2);
}

TEST(SentencePieceModel, ReadsTheSpecialPieces) {
  auto tok = load_tokenizer(fixture("llama_bpe1000.model"));
  EXPECT_EQ(tok->vocab_size(), 1000);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_EQ(tok->token_to_id("<s>"), 1);
  EXPECT_EQ(tok->token_to_id("</s>"), 2);
  EXPECT_EQ(tok->token_to_id("<unk>"), 0);
  Ids with_bos = {1};
  for (int32_t id : tok->encode("hi")) with_bos.push_back(id);
  EXPECT_EQ(tok->encode_with_specials("<s>hi"), with_bos);
  // A user-defined piece is one token wherever it appears.
  auto squeeze = load_tokenizer(fixture("squeeze_bpe400.model"));
  Ids sep = squeeze->encode("a<sep>b");
  EXPECT_EQ(squeeze->decode(sep), "a<sep>b");
  const auto& pieces = dynamic_cast<const SentencePieceTokenizer&>(*squeeze).vocab().pieces;
  const int32_t sep_id = int32_t(std::find(pieces.begin(), pieces.end(), "<sep>") - pieces.begin());
  EXPECT_EQ(std::count(sep.begin(), sep.end(), sep_id), 1);
}

std::string random_text(std::mt19937& rng, size_t n) {
  static const char* units[] = {" ", "  ", "\n", "\t", "a", "e", "th", "The", "0", "9", "é", "ß",
                                "中", "文", "😀", "\xF0\x9F\x91\xA8\xE2\x80\x8D", "<s>", "<0x41>", "x"};
  std::string s;
  for (size_t i = 0; i < n; ++i) s += units[rng() % (sizeof units / sizeof *units)];
  return s;
}

// Llama 2 keeps every space (remove_extra_whitespaces false), so any text without the space
// symbol U+2581 itself (which sentencepiece decodes as a space) comes back exactly.
TEST(SentencePieceModel, DecodeOfEncodeIsIdentity) {
  auto tok = load_tokenizer(fixture("llama_bpe1000.model"));
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    std::string s = random_text(rng, trial % 50);
    EXPECT_EQ(tok->decode(tok->encode(s)), s) << "trial " << trial;
  }
  const std::string shakespeare = read_file(shared("text/tinyshakespeare.txt")).substr(300000, 20000);
  ASSERT_FALSE(shakespeare.empty());
  EXPECT_EQ(tok->decode(tok->encode(shakespeare)), shakespeare);
}

// Protobuf bytes for the tests below: a field tag and a length-delimited field.
std::string varint(uint64_t v) {
  std::string s;
  for (; v >= 0x80; v >>= 7) s += char(0x80 | (v & 0x7F));
  return s + char(v);
}
std::string field(int number, const std::string& payload) {
  return varint(uint64_t(number) << 3 | 2) + varint(payload.size()) + payload;
}
std::string varint_field(int number, uint64_t v) { return varint(uint64_t(number) << 3) + varint(v); }

std::string load_error(const std::string& name, const std::string& bytes) {
  static const fs::path dir = testing::fresh_temp_dir("sentencepiece_models");
  const fs::path p = dir / name;
  std::ofstream(p, std::ios::binary) << bytes;
  try {
    load_tokenizer(p.string());
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(name), std::string::npos) << msg;
    return msg;
  }
  ADD_FAILURE() << name << " loaded";
  return "";
}

TEST(SentencePieceModel, RefusesWhatItDoesNotImplement) {
  const std::string good = read_file(fixture("llama_bpe1000.model"));
  ASSERT_FALSE(good.empty());
  // A later trainer_spec / normalizer_spec merges into the first, as in protobuf.
  EXPECT_NE(load_error("unigram.model", good + field(2, varint_field(3, 1))).find("unigram is not supported"),
            std::string::npos);
  EXPECT_NE(load_error("nofallback.model", good + field(2, varint_field(35, 0))).find("byte_fallback"),
            std::string::npos);
  EXPECT_NE(load_error("nfkc.model", good + field(3, field(1, "nmt_nfkc") + field(2, "\x01\x02")))
                .find("normalization rule 'nmt_nfkc' is not supported"),
            std::string::npos);
  EXPECT_NE(load_error("unused.model", good + field(1, field(1, "zz") + varint_field(3, 5))).find("UNUSED"),
            std::string::npos);
  EXPECT_NE(load_error("trunc.model", good.substr(0, good.size() / 2)).find("malformed sentencepiece model"),
            std::string::npos);
  EXPECT_NE(load_error("nobytes.model", field(1, field(1, "a")) + field(2, varint_field(3, 2) + varint_field(35, 1)))
                .find("no byte piece <0x00>"),
            std::string::npos);
}

// The command line, as a user runs it: a tokenizer.model file, and one that is refused.
TEST(SentencePieceModel, TokenizeCommandReadsTheModel) {
  const auto& ref = reference();
  const size_t i = 21;  // "ROMEO:\nBut, soft! ..." has a newline, punctuation and merges
  auto r = testing::run_meshtrain("tokenize --tokenizer " + fixture("llama_bpe1000.model") +
                                  " --text \"$(printf 'ROMEO:\\nBut, soft! what light through yonder window breaks?')\"");
  ASSERT_EQ(ref["strings"][i], "ROMEO:\nBut, soft! what light through yonder window breaks?");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(r.output).get<Ids>(), ref["models"]["llama_bpe1000.model"]["ids"][i].get<Ids>());
  const fs::path bad = fs::path(testing::fresh_temp_dir("sentencepiece_cli")) / "unigram_cli.model";
  std::ofstream(bad, std::ios::binary) << read_file(fixture("llama_bpe1000.model")) + field(2, varint_field(3, 1));
  r = testing::run_meshtrain("tokenize --tokenizer " + bad.string() + " --text hi");
  EXPECT_NE(r.code, 0);
  EXPECT_EQ(r.output, "meshtrain: error: " + bad.string() +
                          ": sentencepiece model type unigram is not supported (only BPE, as Llama 2, "
                          "Mistral and TinyLlama use)\n");
}

}  // namespace
}  // namespace mt
