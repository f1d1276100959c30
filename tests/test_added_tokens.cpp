// Added-token matching is one automaton pass (data/longest_match.h), not a comparison with every
// added token at every position: issue 34's tokenizer with 3000 added tokens "a...ab" took 238 s on
// 1 MB of text. These tests check the ids, never the time (bench/bench_added_tokens.cpp prints it).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "added_tokens_fixture.h"
#include "data/longest_match.h"
#include "data/sentencepiece_tokenizer.h"

namespace mt {
namespace {

// The definition: the longest string that starts at i, by comparing each.
uint32_t naive_longest_at(const std::vector<std::string>& strings, const std::string& text, size_t i) {
  uint32_t best = 0;
  for (const auto& s : strings)
    if (!s.empty() && text.compare(i, s.size(), s) == 0 && s.size() > best) best = uint32_t(s.size());
  return best;
}

std::string random_text(std::mt19937& rng, size_t n, const std::string& alphabet) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += alphabet[rng() % alphabet.size()];
  return s;
}

TEST(LongestMatch, EveryPositionMatchesTheNaiveDefinition) {
  std::mt19937 rng(7);
  for (int round = 0; round < 50; ++round) {
    SCOPED_TRACE(round);
    std::vector<std::string> strings;
    const int count = 1 + int(rng() % 30);
    for (int i = 0; i < count; ++i) strings.push_back(random_text(rng, 1 + rng() % 8, round % 2 ? "ab" : "abc"));
    strings.push_back("");  // ignored
    const std::string text = random_text(rng, 2000, "abcd");
    const LongestMatch m(strings);
    const std::vector<uint32_t> got = m.longest_at_each(text);
    ASSERT_EQ(got.size(), text.size());
    for (size_t i = 0; i < text.size(); ++i) ASSERT_EQ(got[i], naive_longest_at(strings, text, i)) << "at " << i;
  }
  EXPECT_TRUE(LongestMatch().longest_at_each("abc") == std::vector<uint32_t>(3, 0));
}

// The tokenizer's ids against a reference that splits the text by the naive definition and
// encodes the text between the added tokens on its own.
std::vector<int32_t> reference_ids(const SentencePieceTokenizer& tok, const std::vector<std::string>& added,
                                   const std::string& text) {
  std::vector<int32_t> out;
  size_t plain = 0;
  for (size_t i = 0; i < text.size();) {
    const uint32_t len = naive_longest_at(added, text, i);
    if (len == 0) {
      ++i;
      continue;
    }
    for (int32_t id : tok.encode(text.substr(plain, i - plain))) out.push_back(id);
    out.push_back(testing::added_token_id(int(len) - 1));
    i += len;
    plain = i;
  }
  for (int32_t id : tok.encode(text.substr(plain))) out.push_back(id);
  return out;
}

TEST(AddedTokens, SplittingMatchesTheNaiveLongestFirstReference) {
  const int kCount = 300;
  const SentencePieceTokenizer tok(testing::crafted_added_token_vocab(kCount), "<crafted>");
  std::vector<std::string> added;
  for (int k = 1; k <= kCount; ++k) added.push_back(std::string(size_t(k), 'a') + "b");
  std::mt19937 rng(11);
  std::string text;
  while (text.size() < 20000) {  // runs of a's of every length, some ending in b, with x and y between
    text += std::string(rng() % 400, 'a');
    text += random_text(rng, 1 + rng() % 3, "bxyb");
  }
  EXPECT_EQ(tok.encode(text), reference_ids(tok, added, text));
}

// Issue 34's case at its full size: 3000 added tokens, ~1 MB of text built so that the ids are
// known without the naive reference (too slow at this size): each "a"^k "b" is exactly the added
// token k (no other added token starts there), each "x" and "y" its own piece.
TEST(AddedTokens, ThreeThousandCraftedTokensOnAMegabyteGiveTheirIds) {
  const int kCount = 3000;
  const SentencePieceTokenizer tok(testing::crafted_added_token_vocab(kCount), "<crafted>");
  const int32_t x = testing::kFirstAddedId - 2, y = testing::kFirstAddedId - 1;
  std::mt19937 rng(3);
  std::string text;
  std::vector<int32_t> expected;
  while (text.size() < (1u << 20)) {
    const int k = 1 + int(rng() % kCount);
    text += std::string(size_t(k), 'a') + "b";
    expected.push_back(testing::added_token_id(k));
    text += "xy";
    expected.push_back(x);
    expected.push_back(y);
  }
  const std::vector<int32_t> ids = tok.encode(text);
  ASSERT_EQ(ids.size(), expected.size());
  EXPECT_TRUE(ids == expected);
  EXPECT_EQ(tok.decode(ids), text);
}

// Specials (control pieces) in encode_with_specials go through the same automaton.
TEST(AddedTokens, SpecialsInTemplatesAreTheLongestAtEachPlace) {
  auto vocab = testing::crafted_added_token_vocab(2);
  using Type = SentencePieceTokenizer::PieceType;
  for (const char* p : {"<|x|>", "<|x|>y", "<|"}) {
    vocab.pieces.push_back(p), vocab.scores.push_back(0), vocab.types.push_back(Type::control);
  }
  const SentencePieceTokenizer tok(vocab, "<crafted>");
  const int32_t n = int32_t(vocab.pieces.size());
  const int32_t x = testing::kFirstAddedId - 2, y = testing::kFirstAddedId - 1;
  EXPECT_EQ(tok.encode_with_specials("x<|x|>yy<|x|><|"), (std::vector<int32_t>{x, n - 2, y, n - 3, n - 1}));
}

}  // namespace
}  // namespace mt
