#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>


#include "core/error.h"
#include "data_fixtures.h"
#include "data/byte_tokenizer.h"
#include "data/text_dataset.h"
#include "data/tokenizer.h"
#include "temp_dirs.h"

namespace mt {
namespace {

using testdata::error_of;

std::filesystem::path temp_file(const std::string& name, const std::string& content) {
  static const std::filesystem::path dir = testing::fresh_temp_dir("data_files");
  auto p = dir / name;
  std::ofstream(p, std::ios::binary) << content;
  return p;
}

bool same_batch(const Batch& a, const Batch& b) {
  return a.inputs == b.inputs && a.targets == b.targets && a.batch_size == b.batch_size &&
         a.seq_len == b.seq_len;
}

TEST(DataTokenizer, RoundTripsAllByteValues) {
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(char(i));
  all += all;  // including NUL and bytes >= 0x80 in the middle
  ByteTokenizer tok;
  EXPECT_EQ(tok.vocab_size(), 256);
  std::vector<int32_t> ids = tok.encode(all);
  ASSERT_EQ(ids.size(), all.size());
  for (int i = 0; i < 256; ++i) EXPECT_EQ(ids[size_t(i)], i);
  EXPECT_EQ(tok.decode(ids), all);
  EXPECT_TRUE(tok.encode("").empty());
  EXPECT_EQ(tok.decode(tok.encode("héllo, wörld")), "héllo, wörld");
}

TEST(DataTokenizer, DecodeRejectsOutOfRangeIds) {
  ByteTokenizer tok;
  std::string msg = error_of([&] { tok.decode(std::vector<int32_t>{65, 256}); });
  EXPECT_NE(msg.find("256"), std::string::npos) << msg;
  msg = error_of([&] { tok.decode(std::vector<int32_t>{-3}); });
  EXPECT_NE(msg.find("-3"), std::string::npos) << msg;
}

TEST(DataDataset, BuiltinTextSplits) {
  const size_t n = builtin_text().size();
  EXPECT_GE(n, 8u * 1024);
  EXPECT_LE(n, 20u * 1024);
  TextDataset d("", 0.1, 128);
  EXPECT_EQ(d.name(), "<built-in text>");
  EXPECT_EQ(d.train_tokens().size() + d.val_tokens().size(), n);
  EXPECT_EQ(d.val_tokens().size(), size_t(double(n) * 0.1));
  // The validation split is the tail of the text.
  std::vector<int32_t> all = ByteTokenizer().encode(builtin_text());
  EXPECT_TRUE(std::equal(d.val_tokens().begin(), d.val_tokens().end(),
                         all.end() - std::ptrdiff_t(d.val_tokens().size())));
}

TEST(DataDataset, LoadsFile) {
  std::string text;
  for (int i = 0; i < 50; ++i) text += "line " + std::to_string(i) + " of the file\n";
  auto p = temp_file("load.txt", text);
  TextDataset d(p.string(), 0.25, 16);
  EXPECT_EQ(d.name(), p.string());
  EXPECT_EQ(ByteTokenizer().decode(d.train_tokens()) + ByteTokenizer().decode(d.val_tokens()), text);
  std::filesystem::remove(p);
}

TEST(DataDataset, MissingFileNamesFile) {
  std::string msg = error_of([] { TextDataset("/no/such/dir/corpus.txt", 0.1, 16); });
  EXPECT_NE(msg.find("/no/such/dir/corpus.txt"), std::string::npos) << msg;
}

TEST(DataDataset, EmptyFileNamesFile) {
  auto p = temp_file("empty.txt", "");
  std::string msg = error_of([&] { TextDataset(p.string(), 0.1, 16); });
  EXPECT_NE(msg.find(p.string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("empty"), std::string::npos) << msg;
  std::filesystem::remove(p);
}

TEST(DataDataset, DirectoryIsAnError) {
  auto dir = std::filesystem::path(testing::fresh_temp_dir("data_a_directory"));
  std::string msg = error_of([&] { TextDataset(dir.string(), 0.1, 16); });
  EXPECT_NE(msg.find(dir.string()), std::string::npos) << msg;
}

TEST(DataDataset, TooShortForSeqLen) {
  std::string msg = error_of([] { TextDataset::from_text("short text", 0.0, 16, "tiny.txt"); });
  EXPECT_NE(msg.find("tiny.txt"), std::string::npos) << msg;
  EXPECT_NE(msg.find("seq_len"), std::string::npos) << msg;
  // Long enough to train on, but the validation tail is too short.
  std::string text(100, 'a');
  msg = error_of([&] { TextDataset::from_text(text, 0.1, 16, "v.txt"); });
  EXPECT_NE(msg.find("validation"), std::string::npos) << msg;
  // No validation split requested: fine.
  EXPECT_NO_THROW(TextDataset::from_text(text, 0.0, 16));
}

TEST(DataSampler, TargetsAreInputsShiftedByOne) {
  TextDataset d("", 0.1, 32);
  BatchSampler s(d, 4, 7);
  const auto& tok = d.train_tokens();
  for (int k = 0; k < 5; ++k) {
    Batch b = s.next();
    ASSERT_EQ(b.batch_size, 4);
    ASSERT_EQ(b.seq_len, 32);
    ASSERT_EQ(b.inputs.size(), 4u * 32);
    ASSERT_EQ(b.targets.size(), 4u * 32);
    for (int r = 0; r < 4; ++r) {
      const int32_t* in = b.inputs.data() + r * 32;
      const int32_t* tg = b.targets.data() + r * 32;
      for (int t = 0; t + 1 < 32; ++t) EXPECT_EQ(tg[t], in[t + 1]);
      // The row is a real window of 33 consecutive training tokens.
      std::vector<int32_t> window(in, in + 32);
      window.push_back(tg[31]);
      EXPECT_NE(std::search(tok.begin(), tok.end(), window.begin(), window.end()), tok.end());
    }
  }
}

TEST(DataSampler, DeterministicBySeed) {
  TextDataset d("", 0.1, 64);
  BatchSampler a(d, 8, 1234), b(d, 8, 1234), c(d, 8, 1235);
  bool any_diff = false;
  for (int k = 0; k < 10; ++k) {
    Batch ba = a.next(), bb = b.next(), bc = c.next();
    EXPECT_TRUE(same_batch(ba, bb)) << "batch " << k;
    any_diff |= !same_batch(ba, bc);
  }
  EXPECT_TRUE(any_diff) << "different seeds gave the same batches";
  // Consecutive batches differ too.
  BatchSampler e(d, 8, 1234);
  EXPECT_FALSE(same_batch(e.next(), e.next()));
}

TEST(DataSampler, CoversAllWindowStarts) {
  // 20 tokens, windows of 5: 16 possible starts, each must be drawn.
  std::string text;
  for (int i = 0; i < 20; ++i) text.push_back(char('A' + i));
  TextDataset d = TextDataset::from_text(text, 0.0, 4);
  BatchSampler s(d, 16, 99);
  std::set<int32_t> firsts;
  for (int k = 0; k < 50; ++k) {
    Batch b = s.next();
    for (int r = 0; r < 16; ++r) firsts.insert(b.inputs[size_t(r * 4)]);
  }
  EXPECT_EQ(firsts.size(), 16u);
  EXPECT_EQ(*firsts.begin(), 'A');
  EXPECT_EQ(*firsts.rbegin(), 'A' + 15);
}

TEST(DataSampler, SaveRestoreReproducesNextBatches) {
  TextDataset d("", 0.1, 64);
  BatchSampler a(d, 4, 42);
  for (int k = 0; k < 3; ++k) a.next();
  SamplerState st = a.state();
  EXPECT_EQ(st.seed, 42u);
  EXPECT_EQ(st.rows_drawn, 3 * 4);
  std::vector<Batch> expected;
  for (int k = 0; k < 5; ++k) expected.push_back(a.next());

  BatchSampler b(d, 4, 0);  // a resumed run: fresh sampler, state from the checkpoint
  b.restore(st);
  for (int k = 0; k < 5; ++k) EXPECT_TRUE(same_batch(b.next(), expected[size_t(k)])) << k;
  EXPECT_EQ(b.state().rows_drawn, 8 * 4);

  a.restore(st);  // rewinding the same sampler also works
  EXPECT_TRUE(same_batch(a.next(), expected[0]));
}

TEST(DataValidation, ConsecutiveNonOverlappingWindows) {
  TextDataset d("", 0.1, 100);
  const auto& val = d.val_tokens();
  ValidationBatches v(d, 3);
  const int64_t windows = (int64_t(val.size()) - 1) / 100;
  ASSERT_GT(windows, 3);
  EXPECT_EQ(v.num_windows(), windows);
  EXPECT_EQ(v.num_batches(), (windows + 2) / 3);
  Batch b;
  int64_t w = 0, batches = 0;
  while (v.next(b)) {
    ++batches;
    EXPECT_LE(b.batch_size, 3);
    for (int64_t r = 0; r < b.batch_size; ++r, ++w)
      for (int64_t t = 0; t < 100; ++t) {
        EXPECT_EQ(b.inputs[size_t(r * 100 + t)], val[size_t(w * 100 + t)]);
        EXPECT_EQ(b.targets[size_t(r * 100 + t)], val[size_t(w * 100 + t + 1)]);
      }
  }
  EXPECT_EQ(w, windows);
  EXPECT_EQ(batches, v.num_batches());
  // Fixed: after reset, the same first batch again.
  v.reset();
  Batch again;
  ASSERT_TRUE(v.next(again));
  EXPECT_EQ(again.inputs, std::vector<int32_t>(val.begin(), val.begin() + 300));
}

TEST(DataValidation, EmptyWhenNoValidationSplit) {
  TextDataset d("", 0.0, 64);
  ValidationBatches v(d, 4);
  Batch b;
  EXPECT_EQ(v.num_windows(), 0);
  EXPECT_FALSE(v.next(b));
}

// A real tokenizer replaces the byte tokenizer for plain text; the split is over its tokens.
TEST(DataDataset, UsesGivenTokenizer) {
  const std::string path =
      std::string(MESHTRAIN_SOURCE_DIR) + "/../shared/data/tokenizers/tiktoken_small/tokenizer.model";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "shared data missing: " << path;
  auto tok = load_tokenizer(path);
  const std::string text(builtin_text());
  TextDataset d = TextDataset::from_text(text, 0.1, 32, "<text>", tok.get());
  std::vector<int32_t> all = tok->encode(text);
  std::vector<int32_t> joined = d.train_tokens();
  joined.insert(joined.end(), d.val_tokens().begin(), d.val_tokens().end());
  EXPECT_EQ(joined, all);
  EXPECT_LT(all.size(), text.size());  // BPE merges bytes
  EXPECT_EQ(TextDataset::from_text(text, 0.1, 32).train_tokens().size() +
                TextDataset::from_text(text, 0.1, 32).val_tokens().size(),
            text.size());
}

}  // namespace
}  // namespace mt
