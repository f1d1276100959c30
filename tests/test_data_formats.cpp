// The record formats beside Alpaca and chat `messages` (docs/data.md): ShareGPT conversations,
// prompt/completion and input/output records, {"text"} documents; the refusal of a file whose
// first record fits none; data.columns; and the same files trained on by the binary, a
// completion run resumed mid-epoch and a text-records run resumed alike.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <sstream>

#include "data/byte_tokenizer.h"
#include "data/examples.h"
#include "data/tokenizer.h"
#include "error_of.h"
#include "run_command.h"
#include "temp_dirs.h"
#include "text_files.h"

namespace mt {
namespace {

namespace fs = std::filesystem;
using mt::testing::CommandResult;
using mt::testing::read_file;
using mt::testing::run_meshtrain;
using mt::testing::TempDir;
using Ids = std::vector<int32_t>;

const std::string kGemma = std::string(MESHTRAIN_SOURCE_DIR) + "/tests/data/hf_families/gemma_synthetic";

ExampleSet read_quietly(const std::string& path, const Tokenizer& tok, DataFormat format = DataFormat::kAuto) {
  ExampleOptions opt;
  opt.quiet = true;
  opt.format = format;
  return read_examples(path, tok, opt);
}

Ids ids_of(std::string_view text) { return ByteTokenizer().encode(text); }

// A ShareGPT conversation gives exactly the tokens and mask of the same conversation written as
// `messages`, under the tokenizer's template and under a template named by data.format.
TEST(DataFormatShareGpt, RendersAsTheSameConversationInMessages) {
  const std::unique_ptr<Tokenizer> tok = load_tokenizer(kGemma);
  TempDir dir("formats_sharegpt");
  const std::string sharegpt = dir.file(
      "s.jsonl",
      R"({"conversations": [{"from": "system", "value": "Be brief."}, {"from": "human", "value": "2+2?"},)"
      R"( {"from": "gpt", "value": "4."}, {"from": "human", "value": "3+3?"}, {"from": "gpt", "value": "6."}]})"
      "\n"
      R"({"conversations": [{"from": "user", "value": "Hi"}, {"from": "assistant", "value": "Hello!"}]})"
      "\n");
  const std::string messages = dir.file(
      "m.jsonl",
      R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"},)"
      R"( {"role": "assistant", "content": "4."}, {"role": "user", "content": "3+3?"},)"
      R"( {"role": "assistant", "content": "6."}]})"
      "\n"
      R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]})"
      "\n");
  for (DataFormat format : {DataFormat::kAuto, DataFormat::kGemma}) {
    const ExampleSet a = read_quietly(sharegpt, *tok, format), b = read_quietly(messages, *tok, format);
    EXPECT_EQ(a.format, DataFormat::kGemma);
    EXPECT_EQ(a.format, b.format);
    ASSERT_EQ(a.examples.size(), 2u);
    ASSERT_EQ(b.examples.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(a.examples[i].tokens, b.examples[i].tokens) << i;
      EXPECT_EQ(a.examples[i].trained, b.examples[i].trained) << i;
    }
    EXPECT_GT(std::count(a.examples[0].trained.begin(), a.examples[0].trained.end(), 1), 0);
  }
  EXPECT_EQ(example_file_format(sharegpt, tok.get()), DataFormat::kGemma);
}

// A function_call turn whose value is not a call (LLaMA-Factory's {"name", "arguments"}) and unknown
// speakers are skipped and counted with the reason, as any record that does not fit.
TEST(DataFormatShareGpt, BadToolCallTurnsAndUnknownSpeakersAreSkippedWithTheReason) {
  const std::unique_ptr<Tokenizer> tok = load_tokenizer(kGemma);
  TempDir dir("formats_sharegpt_tools");
  const std::string path = dir.file(
      "s.jsonl",
      R"({"conversations": [{"from": "human", "value": "Weather?"}, {"from": "function_call", "value": "{}"}]})"
      "\n"
      R"({"conversations": [{"from": "bot", "value": "x"}]})"
      "\n"
      R"({"conversations": [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello"}]})"
      "\n");
  const ExampleSet set = read_quietly(path, *tok);
  EXPECT_EQ(set.records, 3);
  EXPECT_EQ(set.skipped, 2);
  EXPECT_EQ(set.examples.size(), 1u);
  EXPECT_NE(set.warning.find("line 1: a function_call turn's value is not JSON {\"name\", \"arguments\"}"),
            std::string::npos)
      << set.warning;
}

// prompt/completion and input/output records: the two texts back to back, the prompt untrained,
// the completion and EOS trained; auto-detected.
TEST(DataFormatCompletion, PromptUntrainedCompletionTrained) {
  ByteTokenizer tok;
  TempDir dir("formats_completion");
  const std::string trl = dir.file("pc.jsonl", R"({"prompt": "2+2=", "completion": "4"})" "\n");
  const std::string io = dir.file("io.json", R"([{"input": "2+2=", "output": "4"}])");
  for (const std::string& path : {trl, io}) {
    const ExampleSet set = read_quietly(path, tok);
    EXPECT_EQ(set.format, DataFormat::kCompletion) << path;
    ASSERT_EQ(set.examples.size(), 1u) << path;
    EXPECT_EQ(set.examples[0].tokens, ids_of("2+2=4")) << path;
    EXPECT_EQ(set.examples[0].trained, (std::vector<uint8_t>{0, 0, 0, 0, 1})) << path;
  }
  EXPECT_EQ(example_file_format(trl), DataFormat::kCompletion);
  EXPECT_EQ(prompt_template_name(DataFormat::kCompletion), "none");
  // An instruction makes it Alpaca, input and output its fields.
  EXPECT_EQ(example_file_format(dir.file("a.jsonl", R"({"instruction": "i", "input": "", "output": "o"})")),
            DataFormat::kAlpaca);
}

// With BOS and EOS: BOS + prompt + completion + EOS, as Alpaca has them.
TEST(DataFormatCompletion, BosAndEosAsForAlpaca) {
  const std::unique_ptr<Tokenizer> tok = load_tokenizer(kGemma);
  const Example ex = render_completion(*tok, "Q", "A");
  ASSERT_GE(tok->bos_id(), 0);
  ASSERT_GE(tok->eos_id(), 0);
  Ids want = {tok->bos_id()};
  std::vector<uint8_t> mask = {0};
  for (int32_t id : tok->encode("Q")) want.push_back(id), mask.push_back(0);
  for (int32_t id : tok->encode("A")) want.push_back(id), mask.push_back(1);
  want.push_back(tok->eos_id());
  mask.push_back(1);
  EXPECT_EQ(ex.tokens, want);
  EXPECT_EQ(ex.trained, mask);
}

// {"text"} records: each a document, every token trained, never skipped for length.
TEST(DataFormatTextRecords, EachRecordADocumentEveryTokenTrained) {
  ByteTokenizer tok;
  TempDir dir("formats_text");
  const std::string path = dir.file("t.jsonl", R"({"text": "one document"})" "\n" R"({"text": "two"})" "\n");
  ExampleOptions opt;
  opt.quiet = true;
  opt.max_tokens = 4;  // shorter than both: documents are cut into windows later, not skipped
  const ExampleSet set = read_examples(path, tok, opt);
  EXPECT_EQ(set.format, DataFormat::kTextRecords);
  EXPECT_EQ(set.skipped, 0);
  ASSERT_EQ(set.examples.size(), 2u);
  EXPECT_EQ(set.examples[0].tokens, ids_of("one document"));
  EXPECT_EQ(set.examples[1].tokens, ids_of("two"));
  for (const Example& ex : set.examples)
    EXPECT_TRUE(std::all_of(ex.trained.begin(), ex.trained.end(), [](uint8_t t) { return t == 1; }));
  const std::unique_ptr<Tokenizer> gemma = load_tokenizer(kGemma);
  const Example doc = render_document(*gemma, "x");
  EXPECT_EQ(doc.tokens.front(), gemma->bos_id());
  EXPECT_EQ(doc.tokens.back(), gemma->eos_id());
}

// A first record that fits no format: one line listing every format with its fields, and the key.
TEST(DataFormatDetection, RefusalListsEveryFormatAndTheKey) {
  ByteTokenizer tok;
  TempDir dir("formats_refusal");
  const std::string path = dir.file("q.jsonl", R"({"question": "q", "answer": "a"})" "\n");
  const std::string msg = error_of([&] { read_quietly(path, tok); });
  EXPECT_NE(msg.find("line 1 has \"answer\", \"question\", which fit no format"), std::string::npos) << msg;
  for (const char* part : {"alpaca {\"instruction\"", "\"messages\"", "ShareGPT {\"conversations\"",
                           "completion {\"prompt\", \"completion\"}", "{\"input\", \"output\"}",
                           "text_records {\"text\"}", "set data.format"})
    EXPECT_NE(msg.find(part), std::string::npos) << part << " in " << msg;
}

// data.columns reads a file's own field names as a format's: detection and rendering alike, the
// mapped column winning over a field of the format's name.
TEST(DataFormatColumns, MapsAFilesFieldsOntoAFormat) {
  ByteTokenizer tok;
  TempDir dir("formats_columns");
  const std::string path =
      dir.file("qa.jsonl", R"({"question": "2+2=", "answer": "4", "completion": "ignored"})" "\n");
  ExampleOptions opt;
  opt.quiet = true;
  opt.columns = {"prompt=question", "completion=answer"};
  const ExampleSet set = read_examples(path, tok, opt);
  EXPECT_EQ(set.format, DataFormat::kCompletion);
  ASSERT_EQ(set.examples.size(), 1u);
  EXPECT_EQ(set.examples[0].tokens, ids_of("2+2=4"));
  EXPECT_EQ(set.examples[0].trained, (std::vector<uint8_t>{0, 0, 0, 0, 1}));
  EXPECT_EQ(example_file_format(path, nullptr, opt.columns), DataFormat::kCompletion);
  opt.columns = {"text=body"};
  EXPECT_EQ(read_examples(dir.file("b.jsonl", R"({"body": "a document"})" "\n"), tok, opt).examples[0].tokens,
            ids_of("a document"));
}

TEST(DataFormatColumns, BadEntriesAreRefusedNamingThem) {
  EXPECT_EQ(error_of([] { check_columns({"prompt=question", "completion=answer"}); }), "");
  for (const auto& [entry, why] : std::vector<std::pair<std::string, std::string>>{
           {"prompt", "not field=column"},
           {"prompt=", "not field=column"},
           {"answer=question", "\"answer\" is not a field of a format"}}) {
    const std::string msg = error_of([&] { check_columns({entry}); });
    EXPECT_NE(msg.find("data.columns entry \"" + entry + "\": " + why), std::string::npos) << msg;
  }
  EXPECT_NE(error_of([] { check_columns({"prompt=q", "prompt=r"}); }).find("\"prompt\" is mapped twice"),
            std::string::npos);
  EXPECT_NE(error_of([] { check_columns({"prompt=q", "completion=q"}); }).find("\"q\" is read twice"),
            std::string::npos);
}

// --- the same formats through `meshtrain train` ---

const std::string kRun =
    "train --set train.seq_len=32 --set train.batch_size=2 --set train.log_every=1 --set train.peak_gflops=100 "
    "--set data.cache_dir=off --set data.val_fraction=0 --set model.hidden_size=64 --set model.intermediate_size=160 "
    "--set model.num_hidden_layers=2 --set optim.schedule=constant --set optim.warmup_steps=0";

// Trains `data` 8 steps straight, then 4 + a resume to 8 from the step-4 checkpoint: the same
// losses, so the order of the data resumes where it stopped (mid-epoch: the file holds more rows
// than 4 steps read).
void expect_resume_repeats_the_run(const fs::path& dir, const std::string& data, const std::string& expect_in_log) {
  const std::string run = kRun + " --set data.path=" + data;
  CommandResult r = run_meshtrain(run + " --set train.steps=8 --out " + (dir / "a").string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find(expect_in_log), std::string::npos) << r.output;
  const std::vector<std::string> loss = mt::testing::metric_loss_texts(dir / "a/metrics.jsonl");
  ASSERT_EQ(loss.size(), 8u) << r.output;
  r = run_meshtrain(run + " --set train.steps=4 --set output.checkpoint_every=4 --out " + (dir / "b").string());
  ASSERT_EQ(r.code, 0) << r.output;
  r = run_meshtrain(run + " --set train.steps=8 --set output.checkpoint_every=4 --set train.resume=latest --out " +
                    (dir / "b").string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(mt::testing::metric_loss_texts(dir / "b/metrics.jsonl"), loss);
}

TEST(DataFormatRun, CompletionRecordsTrainAndResumeMidEpoch) {
  TempDir dir("formats_run_completion");
  std::string records;
  for (int i = 0; i < 40; ++i)
    records += R"({"prompt": "count )" + std::to_string(i) + R"( then", "completion": " )" + std::to_string(i + 1) +
               "\"}\n";
  expect_resume_repeats_the_run(dir.path(), dir.file("c.jsonl", records), "(completion examples: 40 train");
}

TEST(DataFormatRun, TextRecordsTrainAsDocumentsAndResume) {
  TempDir dir("formats_run_text");
  std::string records;
  for (int i = 0; i < 40; ++i) records += R"({"text": "Document )" + std::to_string(i) + R"( says hello."})" "\n";
  expect_resume_repeats_the_run(dir.path(), dir.file("t.jsonl", records), "(text records: 40 documents:");
}

// A file with its own field names trains once data.columns maps them.
TEST(DataFormatRun, ColumnsMapAFilesFields) {
  TempDir dir("formats_run_columns");
  std::string records;
  for (int i = 0; i < 20; ++i)
    records += R"({"question": "count )" + std::to_string(i) + R"(", "answer": " )" + std::to_string(i + 1) + "\"}\n";
  const std::string data = dir.file("qa.jsonl", records);
  const std::string run = kRun + " --set train.steps=1 --set data.path=" + data + " --out " + dir.path("run");
  CommandResult r = run_meshtrain(run);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("line 1 has \"answer\", \"question\", which fit no format"), std::string::npos) << r.output;
  r = run_meshtrain(run + " --set 'data.columns=[\"prompt=question\", \"completion=answer\"]'");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("(completion examples: 20 train"), std::string::npos) << r.output;
}

// data.format = "text" on a JSON file would train on its braces: refused, naming text_records.
TEST(DataFormatRun, TextFormatOnAJsonFileIsRefused) {
  TempDir dir("formats_run_refused");
  const std::string data = dir.file("t.jsonl", R"({"text": "a document"})" "\n");
  const CommandResult r =
      run_meshtrain(kRun + " --set train.steps=1 --set data.format=text --set data.path=" + data + " --out " +
                    dir.path("run"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("data.format = \"text\" reads '" + data + "' as plain text"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("data.format = \"text_records\""), std::string::npos) << r.output;
}

// eval --data on {"text"} documents reads them as training does, one stream of windows: the same
// tokens and loss as the plain text they join into (the byte tokenizer puts no marks between them).
TEST(DataFormatRun, EvalReadsTextRecordsAsTrainingDoes) {
  TempDir dir("formats_eval_text");
  std::string records, text;
  for (int i = 0; i < 20; ++i) {
    const std::string doc = "Document " + std::to_string(i) + " says hello. ";
    records += R"({"text": ")" + doc + "\"}\n";
    text += doc;
  }
  const std::string jsonl = dir.file("d.jsonl", records), txt = dir.file("d.txt", text);
  const CommandResult r =
      run_meshtrain(kRun + " --set train.steps=1 --set data.path=" + txt + " --out " + dir.path("run"));
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string eval = "eval -m " + dir.path("run") + "/model --seq-len 32 --batch 2 -d ";
  const CommandResult records_auto = run_meshtrain(eval + jsonl);
  const CommandResult records_given = run_meshtrain(eval + jsonl + " --format text_records");
  const CommandResult plain = run_meshtrain(eval + txt);
  const std::regex result(R"(\d+ tokens, mean loss \S+)");
  std::smatch a, b, c;
  ASSERT_TRUE(std::regex_search(records_auto.output, a, result)) << records_auto.output;
  ASSERT_TRUE(std::regex_search(records_given.output, b, result)) << records_given.output;
  ASSERT_TRUE(std::regex_search(plain.output, c, result)) << plain.output;
  EXPECT_EQ(a.str(), c.str());
  EXPECT_EQ(b.str(), c.str());
  EXPECT_NE(records_auto.output.find("eval: 20 documents (text_records, joined as training joins them)"),
            std::string::npos)
      << records_auto.output;
}

}  // namespace
}  // namespace mt
