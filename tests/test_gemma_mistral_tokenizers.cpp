// Gemma 3 and Mistral v0.3 tokenizer structures, on small tokenizers of our own (the real files'
// licences keep them out of the repository): Gemma 3's byte-fallback BPE with the Replace " " ->
// "▁" normalizer and a Split pre-tokenizer on " " (tests/data/hf_families/gemma_synthetic, made
// by scripts/make_gemma_fixture.py, with ids from tokenizers.js), and Mistral v0.3's 32768-token
// sentencepiece vocabulary with control tokens [INST], [/INST], ... as a tokenizer.json and as a
// tokenizer.model. scripts/check_gemma3_tokenizer.sh compares the real Gemma 3 file.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/tokenizer.h"
#include "mistral_fixture.h"
#include "temp_dirs.h"

namespace mt {
namespace {

namespace fs = std::filesystem;
using namespace mt::testing::mistral;
using Ids = std::vector<int32_t>;

std::string source(const std::string& rel) { return std::string(MESHTRAIN_SOURCE_DIR) + "/" + rel; }

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f);
}

TEST(TokenizerGemma, SyntheticFileLoadsAsByteFallbackBpe) {
  auto tok = load_tokenizer(source("tests/data/hf_families/gemma_synthetic"));
  EXPECT_EQ(tok->kind(), "sentencepiece");
  EXPECT_EQ(tok->bos_id(), 2);  // <bos>
  EXPECT_EQ(tok->eos_id(), 1);  // <eos>
  EXPECT_EQ(tok->token_to_id("<start_of_turn>"), 5);
  EXPECT_EQ(tok->token_to_id("<end_of_turn>"), 6);
  const auto& spm = dynamic_cast<const SentencePieceTokenizer&>(*tok);
  EXPECT_FALSE(spm.vocab().add_dummy_prefix);  // Gemma adds no "▁" in front of a text
  EXPECT_FALSE(spm.vocab().split_at_space);    // nor splits words: merges run across spaces
}

TEST(TokenizerGemma, MatchesTokenizersJsOnTrickyStrings) {
  auto tok = load_tokenizer(source("tests/data/hf_families/gemma_synthetic"));
  const nlohmann::json ref = read_json(source("tests/data/hf_families/gemma_synthetic_reference_ids.json"));
  ASSERT_GE(ref["strings"].size(), 20u);
  size_t fallback = 0;
  for (size_t i = 0; i < ref["strings"].size(); ++i) {
    const std::string s = ref["strings"][i].get<std::string>();
    const Ids want = ref["ids"][i].get<Ids>();
    SCOPED_TRACE("string " + std::to_string(i) + ": " + s);
    EXPECT_EQ(tok->encode_with_specials(s), want);
    // HF's decode writes control tokens (<bos>, <start_of_turn>), meshtrain's sentencepiece
    // decode drops them, as sentencepiece does; text without them decodes alike.
    const bool control = s.find("<bos>") != std::string::npos || s.find("_of_turn>") != std::string::npos;
    if (!control) {
      EXPECT_EQ(tok->decode(want), ref["decoded"][i].get<std::string>());
      EXPECT_EQ(tok->decode(want), s);
    }
    for (int32_t id : want) fallback += id >= 8 && id < 8 + 256;  // <0xXX> tokens
  }
  EXPECT_GT(fallback, 50u);  // CJK, emoji and accents go through byte fallback
}

// Gemma's <start_of_turn> in plain text stays text; its non-special added tokens (<unused0>,
// <mask>) are matched in any text, as HF does.
TEST(TokenizerGemma, SpecialTokensOnlyFromTemplates) {
  auto tok = load_tokenizer(source("tests/data/hf_families/gemma_synthetic"));
  const Ids plain = tok->encode("<start_of_turn>user <bos>");
  for (int32_t id : plain) EXPECT_GE(id, 8);
  EXPECT_EQ(tok->decode(plain), "<start_of_turn>user <bos>");
  EXPECT_EQ(tok->encode("a<unused0>b")[1], 7);
}

void expect_mistral_structure(const Tokenizer& tok) {
  EXPECT_EQ(tok.vocab_size(), kMistralVocab);
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_EQ(tok.token_to_id("[INST]"), 3);
  EXPECT_EQ(tok.token_to_id("[/INST]"), 4);
  EXPECT_EQ(tok.token_to_id("[control_768]"), 770);
  // Plain text never gives a control token: "[INST]" is spelled with bytes and letters.
  const std::string text = "[INST] hello world [/INST]</s>";
  const Ids plain = tok.encode(text);
  for (int32_t id : plain) EXPECT_GE(id, kMistralFirstByte) << "control token from plain text";
  EXPECT_EQ(tok.decode(plain), text);
  // A chat template's string matches them as added tokens.
  const Ids with = tok.encode_with_specials("[INST] hello world[/INST] hello</s>");
  ASSERT_GE(with.size(), 4u);
  EXPECT_EQ(with.front(), 3);
  EXPECT_EQ(with.back(), 2);
  EXPECT_NE(std::find(with.begin(), with.end(), 4), with.end());
}

TEST(TokenizerMistral, V03TokenizerJsonControlTokensAreSpecial) {
  const fs::path dir = mt::testing::fresh_temp_dir("mistral_v03_json");
  auto tok = load_tokenizer(write_mistral_json(dir));
  expect_mistral_structure(*tok);
  // tokenizers.js 0.2.0's ids for the same file (tests/mistral_fixture.h's layout, rebuilt in a
  // scratch directory): the text after a control token gets its own "▁" from the Prepend
  // normalizer, as in HF's legacy Llama/Mistral files.
  EXPECT_EQ(tok->encode_with_specials("<s>[INST] hello[/INST] world</s>[INST] sys\n\nhello world[/INST] hello</s>"),
            (Ids{1, 3, 1027, 1058, 4, 1027, 1063, 2, 3, 1027, 1027, 1046, 1052, 1046, 781, 781, 1054, 1057, 1063, 4,
                 1027, 1058, 2}));
  EXPECT_EQ(tok->encode_with_specials("[INST] hello world [/INST]</s>"), (Ids{3, 1027, 1058, 1063, 1027, 4, 2}));
  EXPECT_EQ(tok->encode("hello world"), (Ids{kMistralFirstPiece + 1 + 26 + 4, kMistralFirstPiece + 1 + 26 + 9}));
}

TEST(TokenizerMistral, V03TokenizerModelControlTokensAreSpecial) {
  const fs::path dir = mt::testing::fresh_temp_dir("mistral_v03_model");
  auto tok = load_tokenizer(write_mistral_model(dir));
  expect_mistral_structure(*tok);
  EXPECT_EQ(tok->encode("hello world"), (Ids{kMistralFirstPiece + 1 + 26 + 4, kMistralFirstPiece + 1 + 26 + 9}));
}

}  // namespace
}  // namespace mt
