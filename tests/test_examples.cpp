// Alpaca and chat rendering (exact text and ids, prompt masking) and the reader's handling of
// bad input (counted skips, errors naming the file).
#include <gtest/gtest.h>

#include <algorithm>

#include "data/byte_tokenizer.h"
#include "data/examples.h"
#include "data_fixtures.h"

namespace mt {
namespace {

using namespace mt::testdata;
using Ids = std::vector<int32_t>;

const char* kNoInputPrompt =
    "Below is an instruction that describes a task. Write a response that appropriately completes "
    "the request.\n\n### Instruction:\nName a colour.\n\n### Response:\n";
const char* kInputPrompt =
    "Below is an instruction that describes a task, paired with an input that provides further "
    "context. Write a response that appropriately completes the request.\n\n### Instruction:\n"
    "Add the numbers.\n\n### Input:\n2 and 3\n\n### Response:\n";

// Number of trained tokens, and whether they form one block at the end.
std::pair<size_t, bool> trained_suffix(const Example& ex) {
  const size_t n = size_t(std::count(ex.trained.begin(), ex.trained.end(), 1));
  const bool suffix = std::all_of(ex.trained.end() - std::ptrdiff_t(n), ex.trained.end(),
                                  [](uint8_t m) { return m == 1; });
  return {n, suffix};
}

TEST(DatasetAlpaca, NoInputTemplateIsExactWithByteTokenizer) {
  ByteTokenizer tok;
  Example ex = render_alpaca(tok, "Name a colour.", "", "Blue.");
  EXPECT_EQ(tok.decode(ex.tokens), std::string(kNoInputPrompt) + "Blue.");
  ASSERT_EQ(ex.trained.size(), ex.tokens.size());
  // No BOS/EOS in the byte tokenizer: exactly the output bytes are trained.
  auto [n, suffix] = trained_suffix(ex);
  EXPECT_EQ(n, 5u);
  EXPECT_TRUE(suffix);
  EXPECT_EQ(alpaca_prompt("Name a colour.", ""), kNoInputPrompt);
}

TEST(DatasetAlpaca, InputTemplateWithBosEosOnTiktokenSmall) {
  MT_REQUIRE_DATA("tokenizers/tiktoken_small/tokenizer.model");
  const Tokenizer& tok = shared_tokenizer("tokenizers/tiktoken_small/tokenizer.model");
  Example ex = render_alpaca(tok, "Add the numbers.", "2 and 3", "The sum is 5.");
  ASSERT_GE(ex.tokens.size(), 3u);
  EXPECT_EQ(ex.tokens.front(), tok.bos_id());
  EXPECT_EQ(ex.tokens.back(), tok.eos_id());
  Ids middle(ex.tokens.begin() + 1, ex.tokens.end() - 1);
  EXPECT_EQ(tok.decode(middle), std::string(kInputPrompt) + "The sum is 5.");
  auto [n, suffix] = trained_suffix(ex);
  EXPECT_EQ(n, tok.encode("The sum is 5.").size() + 1);  // the output and EOS
  EXPECT_TRUE(suffix);
  EXPECT_EQ(ex.trained.front(), 0);
}

TEST(DatasetAlpaca, ReadsAlpacaTinyArray) {
  MT_REQUIRE_DATA("instruct/alpaca_tiny.json");
  MT_REQUIRE_DATA("tokenizers/tiktoken_small/tokenizer.model");
  const Tokenizer& tok = shared_tokenizer("tokenizers/tiktoken_small/tokenizer.model");
  ExampleSet set = read_examples(data_dir() + "instruct/alpaca_tiny.json", tok);
  EXPECT_EQ(set.format, DataFormat::kAlpaca);
  EXPECT_EQ(set.records, 100);
  EXPECT_EQ(set.skipped, 0);
  EXPECT_TRUE(set.warning.empty());
  ASSERT_EQ(set.examples.size(), 100u);
  for (const Example& ex : set.examples) {
    EXPECT_EQ(ex.tokens.front(), tok.bos_id());
    EXPECT_EQ(ex.tokens.back(), tok.eos_id());
    EXPECT_EQ(ex.trained.back(), 1);
  }
}

TEST(DatasetAlpaca, JsonLinesAndArrayGiveTheSameExamples) {
  TempDir dir("alpaca_forms");
  const std::string a = R"({"instruction": "Say hi.", "input": "", "output": "Hi!"})";
  const std::string b = R"({"instruction": "Echo.", "input": "x", "output": "x"})";
  const std::string c = R"({"instruction": "No input field.", "output": "ok"})";
  ByteTokenizer tok;
  ExampleSet lines = read_examples(dir.file("d.jsonl", a + "\n" + b + "\n\n" + c + "\n"), tok);
  ExampleSet array = read_examples(dir.file("d.json", "[" + a + ",\n" + b + ",\n" + c + "]"), tok);
  // A .json file holding JSON Lines is read as lines.
  ExampleSet json_lines = read_examples(dir.file("l.json", a + "\n" + b + "\n" + c), tok);
  ASSERT_EQ(lines.examples.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(lines.examples[i].tokens, array.examples[i].tokens);
    EXPECT_EQ(lines.examples[i].trained, array.examples[i].trained);
    EXPECT_EQ(json_lines.examples[i].tokens, array.examples[i].tokens);
  }
  EXPECT_EQ(tok.decode(lines.examples[2].tokens),
            alpaca_prompt("No input field.", "") + "ok");
}

TEST(DatasetChat, Llama31TemplateIdsAndMask) {
  MT_REQUIRE_DATA("tokenizers/llama3/tokenizer.model");
  const Tokenizer& tok = shared_tokenizer("tokenizers/llama3/tokenizer.model");
  std::vector<ChatMessage> msgs = {{"system", "Be brief."},
                                   {"user", "What is 2+2?"},
                                   {"assistant", "4."},
                                   {"user", "And <|eot_id|> 3+3?"},
                                   {"assistant", "6."}};
  Example ex = render_chat(tok, msgs);
  Ids want = {128000};
  std::vector<uint8_t> mask = {0};
  for (const auto& m : msgs) {
    const bool a = m.role == "assistant";
    Ids head = {128006};
    for (int32_t id : tok.encode(m.role)) head.push_back(id);
    head.push_back(128007);
    for (int32_t id : tok.encode("\n\n")) head.push_back(id);
    Ids body = tok.encode(m.content);
    body.push_back(128009);
    want.insert(want.end(), head.begin(), head.end());
    want.insert(want.end(), body.begin(), body.end());
    mask.insert(mask.end(), head.size(), 0);
    mask.insert(mask.end(), body.size(), a ? 1 : 0);
  }
  EXPECT_EQ(ex.tokens, want);
  EXPECT_EQ(ex.trained, mask);
  // Special-token text inside user content stays plain text: one <|eot_id|> id per message.
  EXPECT_EQ(std::count(ex.tokens.begin(), ex.tokens.end(), 128009), 5);
  EXPECT_EQ(tok.decode(ex.tokens),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n4.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nAnd <|eot_id|> 3+3?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n6.<|eot_id|>");
  // Trained tokens decode to exactly the assistant replies and their <|eot_id|>.
  Ids trained;
  for (size_t i = 0; i < ex.tokens.size(); ++i)
    if (ex.trained[i]) trained.push_back(ex.tokens[i]);
  EXPECT_EQ(tok.decode(trained), "4.<|eot_id|>6.<|eot_id|>");
}

TEST(DatasetChat, ReadsChatJsonlByFields) {
  MT_REQUIRE_DATA("tokenizers/llama3/tokenizer.model");
  const Tokenizer& tok = shared_tokenizer("tokenizers/llama3/tokenizer.model");
  TempDir dir("chat");
  std::string path = dir.file(
      "c.jsonl",
      R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]})"
      "\n"
      R"({"messages": [{"role": "user", "content": "Only a question"}]})"
      "\n");
  ExampleOptions quiet;
  quiet.quiet = true;
  ExampleSet set = read_examples(path, tok, quiet);
  EXPECT_EQ(set.format, DataFormat::kChat);
  EXPECT_EQ(set.records, 2);
  EXPECT_EQ(set.skipped, 1);  // nothing to train on without an assistant message
  EXPECT_NE(set.warning.find("line 2: no response tokens"), std::string::npos) << set.warning;
  ASSERT_EQ(set.examples.size(), 1u);
  EXPECT_EQ(set.examples[0].tokens.front(), 128000);
}

TEST(DatasetChat, NeedsLlama3Specials) {
  ByteTokenizer tok;
  std::string msg = error_of([&] { render_chat(tok, {{"user", "hi"}, {"assistant", "yo"}}); });
  EXPECT_NE(msg.find("byte tokenizer"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Llama 3 special tokens"), std::string::npos) << msg;
  TempDir dir("chat_specials");
  std::string p = dir.file("c.jsonl", R"({"messages": [{"role": "assistant", "content": "x"}]})");
  msg = error_of([&] { read_examples(p, tok); });
  EXPECT_NE(msg.find(p), std::string::npos) << msg;
  EXPECT_NE(msg.find("byte tokenizer has no <|begin_of_text|>"), std::string::npos) << msg;
}

TEST(DatasetBadInput, SkipsAndCountsBadRecords) {
  TempDir dir("bad_records");
  std::string path = dir.file(
      "bad.jsonl",
      R"({"instruction": "Good.", "input": "", "output": "yes"})"
      "\n"
      R"({"instruction": ["not", "a", "string"], "output": "x"})"
      "\n"
      R"({"instruction": "No output."})"
      "\n"
      R"({"instruction": "Wrong type.", "input": 7, "output": "x"})"
      "\n"
      R"({"instruction": "Long.", "output": "A reply of forty-five bytes, too long to fit."})"
      "\n"
      R"({"instruction": "Good again.", "output": "ok"})"
      "\n");
  ByteTokenizer tok;
  ExampleOptions opt;
  opt.max_tokens = 160;  // the no-input template alone is 140 bytes; the long record has 190
  ::testing::internal::CaptureStderr();
  ExampleSet set = read_examples(path, tok, opt);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(set.records, 6);
  EXPECT_EQ(set.skipped, 4);
  EXPECT_EQ(set.too_long, 1);
  EXPECT_EQ(set.examples.size(), 2u);
  EXPECT_EQ(set.warning, "warning: data file '" + path +
                             "': 4 of 6 records skipped (1 longer than the sequence length 160: a "
                             "sequence length of 190 keeps them, or truncate them; "
                             "first: line 2: \"instruction\" is not a string)");
  EXPECT_EQ(err, set.warning + "\n");  // printed once

  opt.truncate = true;  // now the long one is cut to 160 tokens and kept (its reply starts at 145)
  opt.quiet = true;
  ExampleSet cut = read_examples(path, tok, opt);
  EXPECT_EQ(cut.skipped, 3);
  EXPECT_EQ(cut.too_long, 0);
  ASSERT_EQ(cut.examples.size(), 3u);
  EXPECT_EQ(cut.examples[1].tokens.size(), 160u);
  EXPECT_EQ(cut.examples[1].trained.back(), 1);
}

// Issue 34: a record that is valid JSON but not an object means the file is not a data file of
// records; it is refused at that first record (150 MB of numbers used to be parsed to the end
// before "no record is a JSON object"), in one line naming the file and the record, in both
// layouts. Objects that do not fit the format stay counted skips (above).
TEST(DatasetBadInput, TheFirstRecordThatIsNotAnObjectRefusesTheFile) {
  ByteTokenizer tok;
  const std::string good = R"({"instruction": "a", "output": "b"})";
  auto error = [&](const std::string& text, const std::string& name) {
    return error_of([&] { parse_examples(text, name, tok); });
  };
  EXPECT_EQ(error(good + "\n\n[1, 2]\n" + std::string(1000, '{'), "d.jsonl"),
            "data file 'd.jsonl': line 3 is an array, not a JSON object: a data file holds one object per record");
  EXPECT_EQ(error("[" + good + ", 7, {]", "d.json"),
            "data file 'd.json': record 2 is a number, not a JSON object: a data file holds one object per record");
  EXPECT_NE(error("\"text\"\n", "d.jsonl").find("line 1 is a string, not"), std::string::npos);
  EXPECT_NE(error("[null]", "d.json").find("record 1 is null, not"), std::string::npos);
  // Array elements are cut at the array's own level: brackets, commas and quotes in strings and
  // nested values do not end a record.
  const ExampleSet set = parse_examples(
      R"( [ {"instruction": "x,]}\"[", "output": "b", "n": [1, {"m": 2}]} , )" + good + " ] \n", "d.json", tok);
  EXPECT_EQ(set.records, 2);
  EXPECT_EQ(set.examples.size(), 2u);
  EXPECT_NE(error("[" + good + ", {\"instruction\": }]", "d.json")
                .find("data file 'd.json': malformed JSON at byte offset 38: record 2: not valid JSON (at byte 17)"),
            std::string::npos);
  EXPECT_NE(error("[" + good, "d.json").find("malformed JSON at byte offset 36: the array is not closed"),
            std::string::npos);
  EXPECT_NE(error("[" + good + ",]", "d.json").find("record 2 is empty"), std::string::npos);
  EXPECT_NE(error("[" + good + "}", "d.json").find("unexpected '}'"), std::string::npos);
  EXPECT_NE(error("[" + good + "] 2", "d.json").find("byte offset 38: text after the array's end"), std::string::npos);
  EXPECT_NE(error("[" + good + ", " + std::string(1000, '['), "d.json").find("record 2 is nested deeper than 128 levels at byte 166"),
            std::string::npos);
}

TEST(DatasetBadInput, ReportsMissingFieldAndWrongType) {
  TempDir dir("fields");
  ByteTokenizer tok;
  ExampleOptions quiet;
  quiet.quiet = true;
  std::string p = dir.file("f.jsonl", R"({"instruction": "a", "output": "b"})"
                                      "\n"
                                      R"({"instruction": "a"})"
                                      "\n");
  EXPECT_NE(read_examples(p, tok, quiet).warning.find("line 2: \"output\" is missing"),
            std::string::npos);
  p = dir.file("g.json", R"([{"instruction": "a", "output": "b"}, {"instruction": ["x"], "output": "b"}])");
  EXPECT_NE(read_examples(p, tok, quiet).warning.find("record 2: \"instruction\" is not a string"),
            std::string::npos);
}

TEST(DatasetBadInput, MalformedJsonNamesFileAndPlace) {
  TempDir dir("malformed");
  ByteTokenizer tok;
  std::string p = dir.file("m.jsonl", R"({"instruction": "a", "output": "b"})"
                                      "\n{\"instruction\": \"a\", \n");
  std::string msg = error_of([&] { read_examples(p, tok); });
  EXPECT_NE(msg.find(p), std::string::npos) << msg;
  EXPECT_NE(msg.find("line 2: not valid JSON"), std::string::npos) << msg;
  p = dir.file("m.json", R"([{"instruction": "a", "output": "b"}, {"instruction": ])");
  msg = error_of([&] { read_examples(p, tok); });
  EXPECT_NE(msg.find(p), std::string::npos) << msg;
  EXPECT_NE(msg.find("malformed JSON at byte offset"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

// Found by reviewing the reader for fuzz/fuzz_examples.cpp: a number beyond double's range is
// an nlohmann out_of_range, not a parse_error, and escaped uncaught in both layouts.
TEST(DatasetBadInput, NumberOverflowIsMalformedJson) {
  ByteTokenizer tok;
  const std::string rec = R"({"instruction": "a", "output": "b", "n": 1e400})";
  std::string msg = error_of([&] { parse_examples(rec + "\n", "d.jsonl", tok); });
  EXPECT_NE(msg.find("data file 'd.jsonl': line 1: not valid JSON"), std::string::npos) << msg;
  msg = error_of([&] { parse_examples("[" + rec + "]", "d.json", tok); });
  EXPECT_NE(msg.find("data file 'd.json': malformed JSON"), std::string::npos) << msg;
}

TEST(DatasetBadInput, UnusableFilesAreErrors) {
  TempDir dir("unusable");
  ByteTokenizer tok;
  EXPECT_NE(error_of([&] { read_examples(dir.path("nope.json"), tok); }).find("does not exist"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_examples(dir.file("e.json", "  \n"), tok); }).find("is empty"),
            std::string::npos);
  std::string msg = error_of([&] { read_examples(dir.file("o.json", R"({"note": "x"})"), tok); });
  EXPECT_NE(msg.find("cannot tell the format"), std::string::npos) << msg;
  msg = error_of([&] { read_examples(dir.file("n.jsonl", "1\n2\n"), tok); });
  EXPECT_NE(msg.find("n.jsonl': line 1 is a number, not a JSON object"), std::string::npos) << msg;
  ExampleOptions opt;
  opt.format = DataFormat::kAlpaca;
  opt.quiet = true;
  msg = error_of([&] { read_examples(dir.file("s.jsonl", "[1]\n[2]\n"), tok, opt); });
  EXPECT_NE(msg.find("s.jsonl': line 1 is an array, not a JSON object"), std::string::npos) << msg;
  msg = error_of([&] { read_examples(dir.file("a.json", "[]"), tok); });
  EXPECT_NE(msg.find("a.json': no usable records"), std::string::npos) << msg;
  EXPECT_EQ(parse_format("chat"), DataFormat::kChat);
  msg = error_of([&] { parse_format("sharegpt"); });
  EXPECT_NE(msg.find("auto, alpaca, completion, text_records or a chat template: chat, chatml, gemma or mistral; "
                     "ShareGPT conversations are chat records"),
            std::string::npos)
      << msg;
}

}  // namespace
}  // namespace mt
