// GGUF files carry their tokenizer (tokenizer.ggml.*): every tokenizer kind meshtrain reads turns
// into llama.cpp's vocabulary and back with the same encoding, and through the real binary an HF
// directory (sentencepiece tokenizer.model, Llama-2-style or byte-level Llama 3 tokenizer.json)
// exports to a GGUF whose own tokenizer generate / tokenize use, GGUF -> GGUF and GGUF -> HF
// keep it, and a GGUF without one is written only with --no-tokenizer.
#include <gtest/gtest.h>


#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/byte_tokenizer.h"
#include "data/ggml_vocab.h"
#include "data/tokenizer.h"
#include "io/gguf_reader.h"
#include "io/gguf_tokenizer.h"
#include "run_command.h"
#include "temp_dirs.h"

namespace mt {
namespace {

namespace fs = std::filesystem;
using testing::run_meshtrain;

std::string shared(const std::string& rel) { return std::string(MESHTRAIN_SOURCE_DIR) + "/../shared/data/" + rel; }

#define SKIP_WITHOUT(rel) \
  if (!fs::exists(shared(rel))) GTEST_SKIP() << "shared data missing: " << shared(rel)

// Strings that trip tokenizers: leading / repeated / trailing spaces, newlines and tabs, digits,
// contractions, punctuation runs, accents, CJK, emoji, a special token's text and byte tokens' text.
const std::vector<std::string>& tricky_strings() {
  static const std::vector<std::string> s = {
      "Once upon a time, there was a little girl named Lily.",
      " leading space",
      "two  spaces   three\tand a tab\n\nnewlines\r\n",
      "trailing  ",
      "12345 6789 3.14159 1,000,000",
      "I'm sure you'll see it's they've we'd",
      "!!!??? ... --- ***",
      "caf\xC3\xA9 na\xC3\xAFve \xC3\x9C" "ber",
      "\xE4\xBD\xA0\xE5\xA5\xBD\xE4\xB8\x96\xE7\x95\x8C",
      "emoji \xF0\x9F\x98\x80\xF0\x9F\x91\x8D",
      "<s> </s> <|begin_of_text|> <0x41>",
      "",
  };
  return s;
}

// Same ids and same decoded text for every tricky string.
void expect_same_encoding(const Tokenizer& want, const Tokenizer& got, const std::string& what) {
  EXPECT_EQ(got.bos_id(), want.bos_id()) << what;
  EXPECT_EQ(got.eos_id(), want.eos_id()) << what;
  for (const auto& text : tricky_strings()) {
    const std::vector<int32_t> ids = want.encode(text);
    EXPECT_EQ(got.encode(text), ids) << what << ": '" << text << "'";
    EXPECT_EQ(got.decode(ids), want.decode(ids)) << what << ": '" << text << "'";
  }
}

std::unique_ptr<Tokenizer> gguf_tokenizer(const std::string& path) {
  const auto info = read_tokenizer_keys(read_gguf(path));
  if (!info) {
    ADD_FAILURE() << path << " has no tokenizer";
    return nullptr;
  }
  return tokenizer_of_ggml_vocab(*info, path);
}

std::string fresh_dir(const std::string& name) { return mt::testing::fresh_temp_dir("gguf_tok_" + name); }

// ----------------------------------------------------------------------------------------------
// Every tokenizer kind: to llama.cpp's vocabulary and back encodes the same.

TEST(GgmlVocab, EveryTokenizerKindRoundTrips) {
  SKIP_WITHOUT("tokenizers/gpt2/vocab.json");
  struct Case {
    std::string path, model, pre;
  };
  const std::vector<Case> cases = {
      {shared("stories260K/tok512.model"), "llama", ""},          // sentencepiece tokenizer.model
      {shared("stories260K/tok512.bin"), "llama", ""},            // llama2.c
      {shared("tokenizers/tiktoken_small/tokenizer.model"), "gpt2", "llama-bpe"},  // tiktoken
      {shared("tokenizers/tiktoken_small/tokenizer.json"), "gpt2", "llama-bpe"},   // byte-level json
      {shared("tokenizers/gpt2/vocab.json"), "gpt2", "gpt-2"},    // GPT-2 pair
      {shared("tokenizers/llama3/tokenizer.model"), "gpt2", "llama-bpe"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.path);
    const auto src = load_tokenizer(c.path);
    const TokenizerInfo info = ggml_vocab_of(*src, src->vocab_size() + 3);
    EXPECT_EQ(info.model, c.model);
    EXPECT_EQ(info.pre, c.pre);
    ASSERT_EQ(info.tokens.size(), size_t(src->vocab_size() + 3));
    EXPECT_EQ(info.token_types.back(), kTokenUnused);  // padded to the model's vocab_size
    EXPECT_EQ(c.model == "gpt2", !info.merges.empty());
    expect_same_encoding(*src, *tokenizer_of_ggml_vocab(info, "round trip"), c.path);
  }
  // The byte tokenizer: its 256 bytes, no merges.
  ByteTokenizer byte;
  const TokenizerInfo info = ggml_vocab_of(byte, 300);
  EXPECT_EQ(info.model, "gpt2");
  EXPECT_TRUE(info.merges.empty());
  EXPECT_EQ(info.tokens[' '], "\xC4\xA0");  // GPT-2's byte-level character for a space
  expect_same_encoding(byte, *tokenizer_of_ggml_vocab(info, "byte round trip"), "byte");
  // A tokenizer larger than the model is refused.
  EXPECT_THROW(ggml_vocab_of(byte, 255), Error);
}

// ----------------------------------------------------------------------------------------------
// Through the binary.

std::vector<std::string> keys_of_tokenizer(const GgufFile& g) {
  std::vector<std::string> k;
  for (const auto& kv : g.kvs)
    if (kv.key.rfind("tokenizer.ggml.", 0) == 0) k.push_back(kv.key);
  return k;
}

// The tokenizer metadata of two files is the same, key by key.
void expect_same_tokenizer_keys(const std::string& a, const std::string& b) {
  const GgufFile ga = read_gguf(a), gb = read_gguf(b);
  ASSERT_EQ(keys_of_tokenizer(ga), keys_of_tokenizer(gb));
  for (const auto& key : keys_of_tokenizer(ga)) {
    const GgufValue &va = ga.get(key), &vb = gb.get(key);
    EXPECT_TRUE(va.type == vb.type && va.u == vb.u && va.s == vb.s && va.strs == vb.strs && va.ints == vb.ints &&
                va.floats == vb.floats)
        << key;
  }
}

void expect_one_line_error(const std::string& args, const std::string& must_name) {
  const auto r = run_meshtrain(args);
  EXPECT_NE(r.code, 0) << args;
  EXPECT_NE(r.output.find(must_name), std::string::npos) << args << "\n" << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << args << "\n" << r.output;
}

const char* kStoriesText = "Once upon a time, there was a little girl named Lily.";

// stories260K with its sentencepiece tokenizer.model as the only tokenizer file of an HF directory.
TEST(GgufTokenizerCli, SentencepieceTokenizerModel) {
  SKIP_WITHOUT("stories260K/tok512.model");
  const std::string root = fresh_dir("spm"), dir = root + "/hf";
  auto r = run_meshtrain("convert --llama2c " + shared("stories260K/stories260K.bin") + " --tokenizer " +
                         shared("stories260K/tok512.model") + " --out " + dir);
  ASSERT_EQ(r.code, 0) << r.output;
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) fs::remove(dir + "/" + f);
  ASSERT_EQ(find_tokenizer_file(dir), dir + "/tokenizer.model");
  const auto source = load_tokenizer(dir);

  fs::create_directories(root + "/gguf");  // no tokenizer files beside the GGUF
  const std::string gguf = root + "/gguf/stories.gguf";
  r = run_meshtrain("export -m " + dir + " --gguf " + gguf);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("tokenizer llama"), std::string::npos) << r.output;
  const GgufFile g = read_gguf(gguf);
  EXPECT_EQ(g.get_str("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(g.find("tokenizer.ggml.pre"), nullptr);
  EXPECT_EQ(g.get("tokenizer.ggml.tokens").strs.size(), 512u);
  EXPECT_EQ(g.get("tokenizer.ggml.tokens").strs[259], "\xE2\x96\x81t");
  const auto& types = g.get("tokenizer.ggml.token_type").ints;
  EXPECT_EQ(types[0], kTokenUnknown);
  EXPECT_EQ(types[1], kTokenControl);
  EXPECT_EQ(types[2], kTokenControl);
  EXPECT_EQ(std::count(types.begin(), types.end(), int64_t(kTokenByte)), 256);
  EXPECT_EQ(g.get("tokenizer.ggml.scores").floats[260], -1.0);
  EXPECT_EQ(g.get_u32("tokenizer.ggml.unknown_token_id"), 0u);
  EXPECT_EQ(g.get_u32("tokenizer.ggml.bos_token_id"), 1u);
  EXPECT_EQ(g.get_u32("tokenizer.ggml.eos_token_id"), 2u);
  EXPECT_EQ(g.get("tokenizer.ggml.add_bos_token").u, 1u);
  EXPECT_EQ(g.get("tokenizer.ggml.add_space_prefix").u, 1u);
  expect_same_encoding(*source, *gguf_tokenizer(gguf), "tokenizer.model vs its GGUF");

  // generate on the GGUF alone uses the file's own tokenizer.
  r = run_meshtrain("generate -m " + gguf + " -n 40");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.rfind(kStoriesText, 0), 0u) << r.output;

  // So does eval.
  const std::string text = root + "/eval.txt";
  {
    std::ofstream f(text);
    for (int k = 0; k < 20; ++k) f << kStoriesText << " She loved to play outside in the park.\n";
  }
  r = run_meshtrain("eval -m " + gguf + " -d " + text + " --seq-len 32 --batch 2");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("perplexity"), std::string::npos) << r.output;

  // GGUF -> GGUF keeps the metadata; GGUF -> HF writes tokenizer files that encode the same.
  r = run_meshtrain("export -m " + gguf + " --gguf " + root + "/again.gguf --merged " + root + "/back");
  ASSERT_EQ(r.code, 0) << r.output;
  expect_same_tokenizer_keys(gguf, root + "/again.gguf");
  expect_same_encoding(*source, *load_tokenizer(root + "/back"), "tokenizer.model vs GGUF -> HF");
  r = run_meshtrain("generate -m " + root + "/back -n 40");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.rfind(kStoriesText, 0), 0u) << r.output;
}

// The same model with the Llama-2-style tokenizer.json (sentencepiece BPE ranked by merges) that
// convert writes from llama2.c's tokenizer.bin: llama.cpp ranks by score, so the scores come from
// the merges, and encoding agrees.
TEST(GgufTokenizerCli, SentencepieceTokenizerJson) {
  SKIP_WITHOUT("stories260K/tok512.bin");
  const std::string root = fresh_dir("spm_json"), dir = testing::stories_hf_dir(root);
  ASSERT_FALSE(dir.empty());
  ASSERT_EQ(find_tokenizer_file(dir), dir + "/tokenizer.json");
  fs::remove(dir + "/tokenizer.bin");
  auto r = run_meshtrain("export -m " + dir + " --gguf " + root + "/s.gguf");
  ASSERT_EQ(r.code, 0) << r.output;
  expect_same_encoding(*load_tokenizer(dir), *gguf_tokenizer(root + "/s.gguf"), "tokenizer.json vs its GGUF");
  r = run_meshtrain("generate -m " + root + "/s.gguf -n 40");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.rfind(kStoriesText, 0), 0u) << r.output;
}

// A model trained with the Llama 3 tokenizer: its HF directory holds the byte-level tokenizer.json
// meshtrain writes (128,256 tokens, the Llama 3 split, ignore_merges). Rows of 24 values are not
// whole q4_0 blocks, so this model also shows a --gguf-dtype that no matrix can take.
TEST(GgufTokenizerCli, ByteLevelLlama3TokenizerJson) {
  SKIP_WITHOUT("tokenizers/llama3/tokenizer.model");
  const std::string root = fresh_dir("llama3");
  auto r = run_meshtrain("train --set data.tokenizer=" + shared("tokenizers/llama3/tokenizer.model") +
                         " --set model.vocab_size=128256 --set model.hidden_size=24 --set model.intermediate_size=40"
                         " --set model.num_hidden_layers=1 --set model.num_attention_heads=4"
                         " --set model.num_key_value_heads=2 --set train.steps=1 --set train.seq_len=16"
                         " --set train.batch_size=1 --set train.peak_gflops=100 --set output.dir=" + root + "/run");
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string dir = root + "/run/model";
  fs::remove(dir + "/tokenizer.model");  // the tokenizer.json alone
  ASSERT_EQ(find_tokenizer_file(dir), dir + "/tokenizer.json");
  const auto source = load_tokenizer(dir);
  ASSERT_EQ(source->encode("This is a test sentence."), (std::vector<int32_t>{2028, 374, 264, 1296, 11914, 13}));

  const std::string gguf = root + "/l3.gguf";
  r = run_meshtrain("export -m " + dir + " --gguf " + gguf + " --gguf-dtype q4_0");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("tokenizer gpt2/llama-bpe"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("no matrix could take q4_0"), std::string::npos) << r.output;
  const GgufFile g = read_gguf(gguf);
  EXPECT_EQ(g.get_u32("general.file_type"), 1u);  // MOSTLY_F16: what it holds
  EXPECT_EQ(g.get_str("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(g.get_str("tokenizer.ggml.pre"), "llama-bpe");
  const auto& tokens = g.get("tokenizer.ggml.tokens").strs;
  ASSERT_EQ(tokens.size(), 128256u);
  EXPECT_EQ(tokens[128000], "<|begin_of_text|>");
  EXPECT_EQ(g.get("tokenizer.ggml.token_type").ints[128000], kTokenControl);
  EXPECT_EQ(g.get("tokenizer.ggml.token_type").ints[2028], kTokenNormal);
  EXPECT_EQ(tokens[2028], "This");
  EXPECT_EQ(tokens[374], "\xC4\xA0is");  // " is"
  EXPECT_GT(g.get("tokenizer.ggml.merges").strs.size(), 100000u);
  EXPECT_EQ(g.get_u32("tokenizer.ggml.bos_token_id"), 128000u);
  EXPECT_EQ(g.get_u32("tokenizer.ggml.eos_token_id"), 128001u);
  EXPECT_EQ(g.get("tokenizer.ggml.add_bos_token").u, 1u);
  expect_same_encoding(*source, *gguf_tokenizer(gguf), "Llama 3 tokenizer.json vs its GGUF");
  r = run_meshtrain("tokenize -t " + gguf + " --text 'This is a test sentence.' --bos");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output, "[128000, 2028, 374, 264, 1296, 11914, 13]\n");

  r = run_meshtrain("export -m " + gguf + " --gguf " + root + "/again.gguf --merged " + root + "/back");
  ASSERT_EQ(r.code, 0) << r.output;
  expect_same_tokenizer_keys(gguf, root + "/again.gguf");
  expect_same_encoding(*source, *load_tokenizer(root + "/back"), "Llama 3 GGUF -> HF");
  r = run_meshtrain("generate -m " + gguf + " -n 3 -p Hello");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("<|begin_of_text|>Hello", 0), 0u) << r.output;  // BOS, then the prompt
}

// No tokenizer anywhere: the GGUF is refused in one line naming where meshtrain looked and the
// flag, nothing is written; --no-tokenizer writes it; --tokenizer supplies one.
TEST(GgufTokenizerCli, NoTokenizerNeedsTheFlag) {
  SKIP_WITHOUT("stories260K/tok512.model");
  const std::string root = fresh_dir("none"), dir = testing::stories_hf_dir(root);
  ASSERT_FALSE(dir.empty());
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind("tokenizer", 0) == 0) fs::remove(e.path());
  const std::string gguf = root + "/bare.gguf";
  expect_one_line_error("export -m " + dir + " --gguf " + gguf, "--no-tokenizer");
  expect_one_line_error("export -m " + dir + " --gguf " + gguf, dir);
  EXPECT_FALSE(fs::exists(gguf));
  expect_one_line_error("export -m " + dir + " --gguf " + gguf + " --no-tokenizer --tokenizer " +
                            shared("stories260K/tok512.model"),
                        "contradict");
  expect_one_line_error("export -m " + dir + " --gguf-adapter " + root + "/a.gguf --adapter " + dir +
                            " --tokenizer " + shared("stories260K/tok512.model"),
                        "--tokenizer applies to --merged and --gguf");

  auto r = run_meshtrain("export -m " + dir + " --gguf " + gguf + " --no-tokenizer");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("no tokenizer"), std::string::npos) << r.output;
  EXPECT_EQ(read_gguf(gguf).find("tokenizer.ggml.model"), nullptr);
  expect_one_line_error("generate -m " + gguf + " -n 3", "carries no tokenizer");

  r = run_meshtrain("export -m " + dir + " --gguf " + root + "/with.gguf --tokenizer " +
                    shared("stories260K/tok512.model"));
  ASSERT_EQ(r.code, 0) << r.output;
  expect_same_encoding(*load_tokenizer(shared("stories260K/tok512.model")), *gguf_tokenizer(root + "/with.gguf"),
                       "--tokenizer");
  // A GGUF's tokenizer given to a model without one.
  r = run_meshtrain("generate -m " + gguf + " --tokenizer " + root + "/with.gguf -n 40");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.rfind(kStoriesText, 0), 0u) << r.output;
}

}  // namespace
}  // namespace mt
