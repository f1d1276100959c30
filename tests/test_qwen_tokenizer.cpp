// The Qwen tokenizer (Qwen2.5, Qwen3): NFC normalizer, the split pattern that takes digits one at
// a time, byte-level BPE and added tokens, against ids that Hugging Face's tokenizers.js gave for
// ../shared/data/tokenizers/qwen3 (tests/data/hf_families/qwen3_reference_ids.json, written by
// scripts/hf_reference_ids.mjs).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/bpe_tokenizer.h"
#include "data/pretokenize.h"
#include "data/tokenizer.h"
#include "data/tokenizer_readers.h"
#include "data/unicode.h"

namespace mt {
namespace {

namespace fs = std::filesystem;
using Ids = std::vector<int32_t>;

const std::string kQwen3 = std::string(MESHTRAIN_SOURCE_DIR) + "/../shared/data/tokenizers/qwen3";

const Tokenizer& qwen3() {
  static std::unique_ptr<Tokenizer> tok = load_tokenizer(kQwen3);
  return *tok;
}

#define REQUIRE_QWEN3() \
  if (!fs::exists(kQwen3 + "/tokenizer.json")) GTEST_SKIP() << "shared data missing: " << kQwen3

nlohmann::json reference() {
  std::ifstream f(std::string(MESHTRAIN_SOURCE_DIR) + "/tests/data/hf_families/qwen3_reference_ids.json");
  return nlohmann::json::parse(f);
}

std::vector<std::string> pieces(SplitPattern p, std::string_view text) {
  std::vector<std::string> out;
  for (size_t pos = 0; pos < text.size();) {
    const size_t end = next_piece_end(p, text, pos);
    out.emplace_back(text.substr(pos, end - pos));
    pos = end;
  }
  return out;
}

TEST(UnicodeNfc, ComposesReordersAndKeepsExclusions) {
  using unicode::nfc;
  EXPECT_EQ(nfc("plain ASCII and caf\xC3\xA9"), "plain ASCII and caf\xC3\xA9");  // already NFC
  EXPECT_EQ(nfc("cafe\xCC\x81"), "caf\xC3\xA9");                                  // e + U+0301 -> é
  EXPECT_EQ(nfc("\xE2\x84\xAB"), "\xC3\x85");              // U+212B ANGSTROM SIGN -> U+00C5 (singleton)
  EXPECT_EQ(nfc("e\xCC\xA3\xCC\x82"), "\xE1\xBB\x87");     // e + dot below + circumflex -> U+1EC7
  EXPECT_EQ(nfc("e\xCC\x82\xCC\xA3"), "\xE1\xBB\x87");     // the marks in the other order: reordered first
  EXPECT_EQ(nfc("q\xCC\x87\xCC\xA3"), "q\xCC\xA3\xCC\x87");  // no composite: only reordered (220 before 230)
  EXPECT_EQ(nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), "\xEA\xB0\x81");  // Hangul L V T -> U+AC01
  EXPECT_EQ(nfc("\xE0\xA5\x98"), "\xE0\xA4\x95\xE0\xA4\xBC");  // U+0958 is a composition exclusion
  EXPECT_EQ(nfc("=\xCC\xB8"), "\xE2\x89\xA0");                // = + U+0338 -> ≠
  EXPECT_EQ(nfc("\xEF\xAC\x81"), "\xEF\xAC\x81");              // ﬁ: compatibility only, kept by NFC
  EXPECT_EQ(nfc("a\xCC\x81\xCC\x81"), "\xC3\xA1\xCC\x81");     // the second acute is blocked
  // Invalid UTF-8 stays byte for byte and blocks composition across it.
  EXPECT_EQ(nfc(std::string("e\xFF\xCC\x81", 4)), std::string("e\xFF\xCC\x81", 4));
  EXPECT_EQ(nfc(std::string("\xCC\x81\x80", 3)), std::string("\xCC\x81\x80", 3));
}

TEST(TokenizerPretokenize, QwenPatternTakesDigitsOneAtATime) {
  const auto Q = SplitPattern::kQwen2;
  EXPECT_EQ(pieces(Q, "abc12345 x"), (std::vector<std::string>{"abc", "1", "2", "3", "4", "5", " x"}));
  EXPECT_EQ(pieces(SplitPattern::kLlama3, "abc12345 x"), (std::vector<std::string>{"abc", "123", "45", " x"}));
  EXPECT_EQ(pieces(Q, "I'M here\n\n  ok"), (std::vector<std::string>{"I", "'M", " here", "\n\n", " ", " ok"}));
  EXPECT_EQ(pieces(Q, "\xD9\xA1\xD9\xA2"), (std::vector<std::string>{"\xD9\xA1", "\xD9\xA2"}));  // Arabic-Indic digits
}

TEST(TokenizerQwen, LoadsWithNfcQwenSplitAndAddedTokens) {
  REQUIRE_QWEN3();
  const Tokenizer& t = qwen3();
  ASSERT_EQ(t.kind(), "hf-bpe");
  const auto& bpe = dynamic_cast<const BpeTokenizer&>(t);
  EXPECT_EQ(bpe.pattern(), SplitPattern::kQwen2);
  EXPECT_TRUE(bpe.normalizes_nfc());
  EXPECT_EQ(t.vocab_size(), 151669);  // 151,643 BPE tokens + 26 added
  EXPECT_EQ(t.token_to_id("<|endoftext|>"), 151643);
  EXPECT_EQ(t.token_to_id("<|im_start|>"), 151644);
  EXPECT_EQ(t.token_to_id("<|im_end|>"), 151645);
  EXPECT_EQ(t.token_to_id("<tool_call>"), 151657);
  EXPECT_NE(t.chat_template().find("<|im_start|>"), std::string::npos);  // from tokenizer_config.json
  // The shared data README's reference points.
  EXPECT_EQ(t.encode("This is a test sentence."), (Ids{1986, 374, 264, 1273, 11652, 13}));
  EXPECT_EQ(t.encode("1234567890"), (Ids{16, 17, 18, 19, 20, 21, 22, 23, 24, 15}));
}

// Every reference string: the ids tokenizers.js gives (added tokens matched in the text, as HF
// does), the text it decodes them to, and that text is the NFC of the input.
TEST(TokenizerQwen, MatchesTokenizersJsOnTrickyStrings) {
  REQUIRE_QWEN3();
  const Tokenizer& t = qwen3();
  const nlohmann::json ref = reference();
  ASSERT_GE(ref["strings"].size(), 20u);
  size_t normalized = 0;
  for (size_t i = 0; i < ref["strings"].size(); ++i) {
    const std::string s = ref["strings"][i].get<std::string>();
    const Ids want = ref["ids"][i].get<Ids>();
    const std::string decoded = ref["decoded"][i].get<std::string>();
    SCOPED_TRACE("string " + std::to_string(i) + ": " + s);
    EXPECT_EQ(t.encode_with_specials(s), want);
    EXPECT_EQ(t.decode(want), decoded);
    EXPECT_EQ(unicode::nfc(s), decoded);
    normalized += unicode::nfc(s) != s;
    bool has_added = false;
    for (const auto& sp : t.special_tokens()) has_added |= s.find(sp.text) != std::string::npos;
    if (!has_added) {
      EXPECT_EQ(t.encode(s), want);
    }
  }
  EXPECT_GE(normalized, 2u);  // the strings exercise NFC
}

// Plain encode() never produces an added token from text: user data cannot inject control tokens.
TEST(TokenizerQwen, PlainTextNeverBecomesAddedTokens) {
  REQUIRE_QWEN3();
  const Tokenizer& t = qwen3();
  const std::string s = "<|im_start|>user\nhi<|im_end|><|endoftext|>";
  const Ids ids = t.encode(s);
  for (int32_t id : ids) EXPECT_LT(id, 151643);
  EXPECT_EQ(t.decode(ids), s);
  EXPECT_EQ(t.encode_with_specials(s).front(), 151644);
}

TEST(TokenizerQwen, OtherNormalizersAreRefusedInOneLine) {
  const std::string json = R"({"model": {"type": "BPE", "vocab": {}, "merges": []},
    "normalizer": {"type": "NFKC"}, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false}})";
  try {
    read_hf_tokenizer_json(json, "t.json");
    FAIL() << "NFKC accepted";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("t.json: unsupported normalizer"), std::string::npos) << msg;
    EXPECT_NE(msg.find("NFKC"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace mt
