// The Llama 2 style of HF tokenizer.json: the files meshtrain writes from a sentencepiece model
// (hf_sentencepiece_writer.h) read back (hf_sentencepiece_reader.cpp) and encode exactly as
// python3-sentencepiece does (tests/data/sentencepiece/reference_ids.json), in the normalizer
// form meshtrain writes and in the Metaspace pre-tokenizer form of newer files; and
// save_tokenizer_files making a model directory complete.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "data/hf_sentencepiece_writer.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/tokenizer.h"
#include "data/tokenizer_files.h"
#include "data/tokenizer_readers.h"
#include "sentencepiece_fixtures.h"
#include "text_files.h"
#include "temp_dirs.h"

namespace mt {
namespace {

namespace fs = std::filesystem;
using Ids = std::vector<int32_t>;
using nlohmann::json;

using ::mt::testing::read_file, ::mt::testing::spm::fixture, ::mt::testing::spm::shared;
const json& reference() {
  static const json ref = json::parse(read_file(fixture("reference_ids.json")));
  return ref;
}
std::string model_path(const std::string& file) {
  return file == "tok512.model" ? shared("stories260K/tok512.model") : fixture(file);
}
const SentencePieceTokenizer& as_spm(const Tokenizer& t) {
  return dynamic_cast<const SentencePieceTokenizer&>(t);
}
std::unique_ptr<Tokenizer> from_json(const std::string& text, const std::string& name = "tokenizer.json") {
  return read_hf_tokenizer_json(text, name);
}

TEST(HfSentencePiece, WrittenJsonEncodesLikeSentencepiece) {
  const auto& strings = reference()["strings"];
  int models = 0;
  for (const auto& [file, expect] : reference()["models"].items()) {
    if (!fs::exists(model_path(file))) continue;
    ++models;
    auto hf = from_json(hf_tokenizer_json(as_spm(*load_tokenizer(model_path(file)))));
    EXPECT_EQ(hf->token_to_id("<s>"), 1);
    EXPECT_EQ(hf->bos_id(), 1);
    EXPECT_EQ(hf->eos_id(), 2);
    for (size_t i = 0; i < strings.size(); ++i) {
      const std::string s = strings[i].get<std::string>();
      // HF splits added tokens such as the user-defined <sep> out of the text before
      // normalising (checked below), sentencepiece matches them after.
      if (s.find("<sep>") != std::string::npos) continue;
      Ids ids = hf->encode(s);
      EXPECT_EQ(ids, expect["ids"][i].get<Ids>()) << file << " string " << i << ": '" << s << "'";
      EXPECT_EQ(hf->decode(ids), expect["decoded"][i].get<std::string>()) << file << " string " << i;
    }
  }
  EXPECT_GE(models, 2);
  auto squeeze = from_json(hf_tokenizer_json(as_spm(*load_tokenizer(fixture("squeeze_bpe400.model")))));
  Ids expect = squeeze->encode("a");
  expect.push_back(3);  // <sep>
  for (int32_t id : squeeze->encode("b")) expect.push_back(id);
  EXPECT_EQ(squeeze->encode("a<sep>b"), expect);
}

// Newer files carry the space handling in a Metaspace pre-tokenizer, which (unlike sentencepiece)
// adds no dummy prefix when the text already starts with a space.
TEST(HfSentencePiece, MetaspaceFormEncodesLikeHfTokenizers) {
  auto spm = load_tokenizer(fixture("llama_bpe1000.model"));
  json doc = json::parse(hf_tokenizer_json(as_spm(*spm)));
  doc["normalizer"] = nullptr;
  doc["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "first"}, {"split", false}};
  doc["decoder"] = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "first"}, {"split", false}};
  auto hf = from_json(doc.dump());
  auto vocab = as_spm(*spm).vocab();
  vocab.add_dummy_prefix = false;
  const SentencePieceTokenizer no_prefix(vocab, "no prefix");
  for (const auto& sv : reference()["strings"]) {
    const std::string s = sv.get<std::string>();
    const bool leading = s.rfind(" ", 0) == 0 || s.rfind("\u2581", 0) == 0;
    const Tokenizer& expect = leading ? static_cast<const Tokenizer&>(no_prefix) : *spm;
    EXPECT_EQ(hf->encode(s), expect.encode(s)) << "'" << s << "'";
  }
  // prepend_scheme "first": the text after a special token gets no "▁" (HF's offsets rule).
  Ids after_bos = {1};
  for (int32_t id : no_prefix.encode("hi")) after_bos.push_back(id);
  EXPECT_EQ(hf->encode_with_specials("<s>hi"), after_bos);
  // split=true (the Metaspace default) makes each "▁" start a new word; pieces of this
  // vocabulary never hold a "▁" after their start, so the ids stay those of sentencepiece.
  doc["pre_tokenizer"]["split"] = true;
  auto split = from_json(doc.dump());
  const std::string text = "a  b   c\nthe  end ";
  EXPECT_EQ(split->encode(text), spm->encode(text));
  EXPECT_EQ(split->decode(split->encode(text)), text);
}

TEST(HfSentencePiece, Llama2cTokenizerBinAndItsJsonAgree) {
  if (!fs::exists(shared("stories260K/tok512.bin"))) GTEST_SKIP() << "shared data missing";
  auto bin = load_tokenizer(shared("stories260K/tok512.bin"));
  auto hf = from_json(hf_tokenizer_json(as_spm(*bin)));
  EXPECT_EQ(hf->vocab_size(), bin->vocab_size());
  std::vector<std::string> texts;
  // llama2.c's tokenizer.bin stores spaces as " ", so a literal U+2581 in text is an ordinary
  // character there but a space for HF (and for sentencepiece); texts without it agree.
  for (const auto& s : reference()["strings"])
    if (s.get<std::string>().find("\u2581") == std::string::npos) texts.push_back(s.get<std::string>());
  texts.push_back(read_file(shared("text/tinyshakespeare.txt")).substr(0, 20000));
  for (const auto& s : texts) {
    Ids ids = bin->encode(s);
    EXPECT_EQ(hf->encode(s), ids) << "'" << s.substr(0, 80) << "'";
    EXPECT_EQ(hf->decode(ids), bin->decode(ids));
  }
}

TEST(HfSentencePiece, SaveTokenizerFilesWritesTheHfFiles) {
  const fs::path out = mt::testing::fresh_temp_dir("hf_spm_save"), again = mt::testing::fresh_temp_dir("hf_spm_save2");
  const auto written = save_tokenizer_files(fixture("llama_bpe1000.model"), out.string());
  EXPECT_EQ(written.size(), 3u);
  for (const char* f : {"tokenizer.model", "tokenizer.json", "tokenizer_config.json"})
    EXPECT_TRUE(fs::is_regular_file(out / f)) << f;
  json cfg = json::parse(read_file((out / "tokenizer_config.json").string()));
  EXPECT_EQ(cfg["tokenizer_class"], "LlamaTokenizer");
  EXPECT_EQ(cfg["bos_token"], "<s>");
  EXPECT_EQ(cfg["eos_token"], "</s>");
  EXPECT_EQ(cfg["unk_token"], "<unk>");
  EXPECT_EQ(cfg["add_bos_token"], true);
  EXPECT_EQ(cfg["added_tokens_decoder"]["1"]["content"], "<s>");
  // The directory now loads through tokenizer.json, with the same ids as the model file.
  auto dir_tok = load_tokenizer(out.string());
  auto spm = load_tokenizer(fixture("llama_bpe1000.model"));
  const std::string text = "First Citizen:\n  Before we proceed, 1234 \xE4\xB8\xAD!";
  EXPECT_EQ(dir_tok->encode(text), spm->encode(text));
  // Saving from that directory copies tokenizer.json with its companions.
  const auto copied = save_tokenizer_files(out.string(), again.string());
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "tokenizer.model"})
    EXPECT_TRUE(fs::is_regular_file(again / f)) << f;
  EXPECT_EQ(copied.size(), 3u);
}

TEST(HfSentencePiece, RefusesWhatItDoesNotImplement) {
  auto spm = load_tokenizer(fixture("llama_bpe1000.model"));
  const json good = json::parse(hf_tokenizer_json(as_spm(*spm)));
  auto error_of = [](const json& doc) -> std::string {
    try {
      read_hf_tokenizer_json(doc.dump(), "bad.json");
    } catch (const Error& e) {
      return e.what();
    }
    return "loaded";
  };
  json d = good;
  d["pre_tokenizer"] = {{"type", "Whitespace"}};
  EXPECT_NE(error_of(d).find("bad.json: unsupported pre_tokenizer"), std::string::npos) << error_of(d);
  d = good;
  d["normalizer"]["normalizers"].push_back({{"type", "NFKC"}});
  EXPECT_NE(error_of(d).find("unsupported normalizer step"), std::string::npos) << error_of(d);
  d = good;
  d["normalizer"] = nullptr;
  EXPECT_NE(error_of(d).find("without Replace"), std::string::npos) << error_of(d);
  d = good;
  d["model"]["merges"].push_back("zz qq");
  EXPECT_NE(error_of(d).find("not in the vocab"), std::string::npos) << error_of(d);
  d = good;
  d["model"]["vocab"].erase("<0x41>");
  EXPECT_NE(error_of(d).find("bad.json"), std::string::npos) << error_of(d);
  d = good;
  d["decoder"]["decoders"].push_back({{"type", "WordPiece"}});
  EXPECT_NE(error_of(d).find("unsupported decoder step"), std::string::npos) << error_of(d);
}

}  // namespace
}  // namespace mt
