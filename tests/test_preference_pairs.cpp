// Preference pairs for DPO-style training (data/preference_pairs.h): exact tokens and prompt masks
// of string and conversational records on real tokenizers, TRL's truncation, counted skips, errors
// naming the file, and the bundled examples/village_prefs.jsonl.
#include <gtest/gtest.h>

#include <algorithm>

#include "data/byte_tokenizer.h"
#include "data/chat_templates.h"
#include "data/preference_pairs.h"
#include "data_fixtures.h"
#include "mistral_fixture.h"

namespace mt {
namespace {

using namespace mt::testdata;
using Ids = std::vector<int32_t>;
using Mask = std::vector<uint8_t>;

const char* kGpt2 = "tokenizers/gpt2";
const char* kLlama3 = "tokenizers/llama3/tokenizer.model";
const char* kQwen3 = "tokenizers/qwen3";

Ids concat(std::initializer_list<Ids> parts) {
  Ids out;
  for (const Ids& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

Ids trained_ids(const Example& ex) {
  Ids out;
  for (size_t i = 0; i < ex.tokens.size(); ++i)
    if (ex.trained[i]) out.push_back(ex.tokens[i]);
  return out;
}

// The untrained prefix of a sequence (its prompt).
Ids prompt_of(const Example& ex) {
  const auto first = std::find(ex.trained.begin(), ex.trained.end(), 1);
  return Ids(ex.tokens.begin(), ex.tokens.begin() + (first - ex.trained.begin()));
}

// A mask of `untrained` zeros then `trained` ones.
Mask mask(size_t untrained, size_t trained) {
  Mask m(untrained, 0);
  m.insert(m.end(), trained, 1);
  return m;
}

PreferenceOptions quiet(DataFormat format = DataFormat::kAuto) {
  PreferenceOptions opt;
  opt.format = format;
  opt.quiet = true;
  return opt;
}

const std::string kStringPair =
    R"({"prompt": "What is the capital of France?", "chosen": " Paris is the capital.", "rejected": " Rome, I think."})";

// data.columns reads a file's own field names as prompt / chosen / rejected: the same sequences as
// the standard names give; without the mapping the file holds no pair.
TEST(PreferencePairs, ColumnsMapAFilesFields) {
  const ByteTokenizer tok;
  const std::string renamed =
      R"({"question": "What is the capital of France?", "good": " Paris is the capital.", "bad": " Rome, I think."})";
  PreferenceOptions opt = quiet();
  EXPECT_NE(error_of([&] { parse_preference_pairs(renamed, "p.jsonl", tok, opt); }).find("no record is a preference pair"),
            std::string::npos);
  opt.columns = {"prompt=question", "chosen=good", "rejected=bad"};
  const PreferenceSet set = parse_preference_pairs(renamed, "p.jsonl", tok, opt);
  const PreferenceSet standard = parse_preference_pairs(kStringPair, "p.jsonl", tok, quiet());
  ASSERT_EQ(set.pairs(), 1u);
  ASSERT_EQ(standard.pairs(), 1u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(set.sequences[i].tokens, standard.sequences[i].tokens) << i;
    EXPECT_EQ(set.sequences[i].trained, standard.sequences[i].trained) << i;
  }
  EXPECT_NE(error_of([&] { opt.columns = {"chosen=good", "rejected=good"}; parse_preference_pairs(renamed, "p.jsonl", tok, opt); })
                .find("\"good\" is read twice"),
            std::string::npos);
}

// Standard records as plain text: BOS + prompt untrained, then the answer and EOS trained.
TEST(PreferencePairs, StringPairIsPlainTextWithBosAndEos) {
  for (const char* name : {kGpt2, kLlama3}) {
    SCOPED_TRACE(name);
    if (!std::filesystem::exists(data_dir() + name)) GTEST_SKIP() << "shared data missing: " << data_dir() + name;
    const Tokenizer& tok = shared_tokenizer(name);
    ASSERT_GE(tok.bos_id(), 0);
    ASSERT_GE(tok.eos_id(), 0);
    const PreferenceSet set = parse_preference_pairs(kStringPair + "\n", "p.jsonl", tok, quiet());
    EXPECT_EQ(set.format, DataFormat::kAuto);
    EXPECT_EQ(set.records, 1);
    EXPECT_EQ(set.skipped, 0);
    EXPECT_EQ(set.truncated, 0);
    EXPECT_EQ(set.warning, "");
    ASSERT_EQ(set.pairs(), 1u);
    ASSERT_EQ(set.sequences.size(), 2u);
    const Ids prompt = concat({{tok.bos_id()}, tok.encode("What is the capital of France?")});
    const Ids chosen = concat({tok.encode(" Paris is the capital."), {tok.eos_id()}});
    const Ids rejected = concat({tok.encode(" Rome, I think."), {tok.eos_id()}});
    EXPECT_EQ(set.sequences[0].tokens, concat({prompt, chosen}));
    EXPECT_EQ(set.sequences[0].trained, mask(prompt.size(), chosen.size()));
    EXPECT_EQ(set.sequences[1].tokens, concat({prompt, rejected}));
    EXPECT_EQ(set.sequences[1].trained, mask(prompt.size(), rejected.size()));
  }
}

// With format alpaca a string prompt is the Alpaca prompt: the same ids and mask as SFT's render_alpaca.
TEST(PreferencePairs, AlpacaFormatMatchesRenderAlpaca) {
  ByteTokenizer bytes;
  std::vector<const Tokenizer*> toks = {&bytes};
  for (const char* name : {kGpt2, kLlama3})
    if (std::filesystem::exists(data_dir() + name)) toks.push_back(&shared_tokenizer(name));
  for (const Tokenizer* tok : toks) {
    SCOPED_TRACE(std::string(tok->kind()));
    const PreferenceSet set = parse_preference_pairs(kStringPair, "p.jsonl", *tok, quiet(DataFormat::kAlpaca));
    EXPECT_EQ(set.format, DataFormat::kAlpaca);
    ASSERT_EQ(set.pairs(), 1u);
    const Example chosen = render_alpaca(*tok, "What is the capital of France?", "", " Paris is the capital.");
    const Example rejected = render_alpaca(*tok, "What is the capital of France?", "", " Rome, I think.");
    EXPECT_EQ(set.sequences[0].tokens, chosen.tokens);
    EXPECT_EQ(set.sequences[0].trained, chosen.trained);
    EXPECT_EQ(set.sequences[1].tokens, rejected.tokens);
    EXPECT_EQ(set.sequences[1].trained, rejected.trained);
  }
  // The byte tokenizer has no BOS/EOS: exactly the answer's bytes are trained.
  const PreferenceSet set = parse_preference_pairs(kStringPair, "p.jsonl", bytes, quiet(DataFormat::kAlpaca));
  EXPECT_EQ(bytes.decode(set.sequences[1].tokens), alpaca_prompt("What is the capital of France?", "") + " Rome, I think.");
  EXPECT_EQ(bytes.decode(trained_ids(set.sequences[1])), " Rome, I think.");
}

// A string pair read with a chat format is one user turn and one assistant answer.
TEST(PreferencePairs, StringPairWithChatFormatIsOneTurn) {
  MT_REQUIRE_DATA(kLlama3);
  const Tokenizer& tok = shared_tokenizer(kLlama3);
  const PreferenceSet set = parse_preference_pairs(kStringPair, "p.jsonl", tok, quiet(DataFormat::kChat));
  EXPECT_EQ(set.format, DataFormat::kChat);
  ASSERT_EQ(set.pairs(), 1u);
  const Example want = render_conversation(
      tok, {{"user", "What is the capital of France?"}, {"assistant", " Paris is the capital."}}, DataFormat::kChat);
  EXPECT_EQ(set.sequences[0].tokens, want.tokens);
  EXPECT_EQ(set.sequences[0].trained, want.trained);
  EXPECT_EQ(tok.decode(trained_ids(set.sequences[1])), " Rome, I think.<|eot_id|>");
}

// Conversational with an explicit prompt list: the prompt part is conversation_prompt's rendering
// (an open assistant header at its end), untrained; the answer and <|eot_id|> are trained.
TEST(PreferencePairs, ExplicitPromptMessagesLlama3) {
  MT_REQUIRE_DATA(kLlama3);
  const Tokenizer& tok = shared_tokenizer(kLlama3);
  const std::string rec =
      R"({"prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a colour."}],)"
      R"( "chosen": [{"role": "assistant", "content": "Blue."}],)"
      R"( "rejected": [{"role": "assistant", "content": "No."}]})";
  const PreferenceSet set = parse_preference_pairs(rec, "c.jsonl", tok, quiet());
  EXPECT_EQ(set.format, DataFormat::kChat);  // the llama3 tokenizer's template
  ASSERT_EQ(set.pairs(), 1u);
  const std::vector<ChatMessage> prompt = {{"system", "Be brief."}, {"user", "Name a colour."}};
  std::vector<ChatMessage> full = prompt;
  full.push_back({"assistant", "Blue."});
  const Example all = render_conversation(tok, full, DataFormat::kChat);
  const Ids head = conversation_prompt(tok, prompt, DataFormat::kChat);
  EXPECT_EQ(set.sequences[0].tokens, all.tokens);
  EXPECT_EQ(prompt_of(set.sequences[0]), head);
  EXPECT_EQ(set.sequences[0].trained, mask(head.size(), all.tokens.size() - head.size()));
  EXPECT_EQ(tok.decode(trained_ids(set.sequences[0])), "Blue.<|eot_id|>");
  EXPECT_EQ(tok.decode(trained_ids(set.sequences[1])), "No.<|eot_id|>");
  EXPECT_EQ(prompt_of(set.sequences[1]), head);
  EXPECT_EQ(tok.decode(set.sequences[1].tokens),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nName a colour.<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nNo.<|eot_id|>");
}

// Anthropic HH style: no "prompt"; the shared first user/assistant/user turns are the prompt, and the
// earlier assistant turn in it is not trained (as SFT would train it).
const std::string kImplicit =
    R"({"chosen": [{"role": "user", "content": "Hi there."}, {"role": "assistant", "content": "Hello! How can I help?"},)"
    R"( {"role": "user", "content": "Who bakes the bread?"}, {"role": "assistant", "content": "Mira the baker."}],)"
    R"( "rejected": [{"role": "user", "content": "Hi there."}, {"role": "assistant", "content": "Hello! How can I help?"},)"
    R"( {"role": "user", "content": "Who bakes the bread?"}, {"role": "assistant", "content": "Go away."}]})";

void expect_implicit_prompt(const Tokenizer& tok, DataFormat format, const std::string& open, const std::string& close) {
  const PreferenceSet set = parse_preference_pairs(kImplicit, "hh.jsonl", tok, quiet());
  EXPECT_EQ(set.format, format);
  ASSERT_EQ(set.pairs(), 1u);
  const std::vector<ChatMessage> prompt = {
      {"user", "Hi there."}, {"assistant", "Hello! How can I help?"}, {"user", "Who bakes the bread?"}};
  const Ids head = conversation_prompt(tok, prompt, format);
  for (const auto& [ex, answer] : {std::pair{&set.sequences[0], std::string("Mira the baker.")},
                                   std::pair{&set.sequences[1], std::string("Go away.")}}) {
    std::vector<ChatMessage> full = prompt;
    full.push_back({"assistant", answer});
    const Example all = render_conversation(tok, full, format);
    EXPECT_EQ(ex->tokens, all.tokens);
    EXPECT_EQ(prompt_of(*ex), head);
    // The prompt part untrained (its assistant turn included), the rest as the template masks it.
    Mask want = all.trained;
    std::fill(want.begin(), want.begin() + std::ptrdiff_t(head.size()), 0);
    EXPECT_EQ(ex->trained, want);
    EXPECT_EQ(tok.decode(trained_ids(*ex)), open + answer + close);
  }
  // SFT's rendering trains the earlier answer too; here it is prompt.
  const Example sft = render_conversation(
      tok, {prompt[0], prompt[1], prompt[2], {"assistant", "Mira the baker."}}, format);
  EXPECT_NE(tok.decode(trained_ids(sft)).find("Hello! How can I help?"), std::string::npos);
}

TEST(PreferencePairs, ImplicitPromptLlama3) {
  MT_REQUIRE_DATA(kLlama3);
  expect_implicit_prompt(shared_tokenizer(kLlama3), DataFormat::kChat, "", "<|eot_id|>");
}

TEST(PreferencePairs, ImplicitPromptQwen3Chatml) {
  MT_REQUIRE_DATA(kQwen3);
  // Qwen3's template opens the final answer with an empty reasoning block, part of the answer.
  expect_implicit_prompt(shared_tokenizer(kQwen3), DataFormat::kChatml, "<think>\n\n</think>\n\n", "<|im_end|>");
}

// Gemma's and Mistral's templates (the repository's own fixture tokenizers): the prompt's rendering
// is a prefix of the whole conversation's, and its earlier answer is untrained there too.
TEST(PreferencePairs, ImplicitPromptGemmaAndMistral) {
  auto gemma = load_tokenizer(std::string(MESHTRAIN_SOURCE_DIR) + "/tests/data/hf_families/gemma_synthetic");
  const TempDir dir("pref_mistral");
  auto mistral = load_tokenizer(mt::testing::mistral::write_mistral_json(dir.path()));
  const std::vector<ChatMessage> prompt = {
      {"user", "Hi there."}, {"assistant", "Hello! How can I help?"}, {"user", "Who bakes the bread?"}};
  for (const auto& [tok, format] : {std::pair{gemma.get(), DataFormat::kGemma}, std::pair{mistral.get(), DataFormat::kMistral}}) {
    SCOPED_TRACE(std::string(format_name(format)));
    const PreferenceSet set = parse_preference_pairs(kImplicit, "hh.jsonl", *tok, quiet());
    EXPECT_EQ(set.format, format);  // the tokenizer's special tokens tell its template
    ASSERT_EQ(set.pairs(), 1u);
    const Ids head = conversation_prompt(*tok, prompt, format);
    std::vector<ChatMessage> full = prompt;
    full.push_back({"assistant", "Go away."});
    const Example all = render_conversation(*tok, full, format);
    Mask want = all.trained;
    std::fill(want.begin(), want.begin() + std::ptrdiff_t(head.size()), 0);
    EXPECT_EQ(set.sequences[1].tokens, all.tokens);
    EXPECT_EQ(prompt_of(set.sequences[1]), head);
    EXPECT_EQ(set.sequences[1].trained, want);
    const Ids trained = trained_ids(set.sequences[1]);
    ASSERT_FALSE(trained.empty());
    EXPECT_EQ(trained.back(), end_of_turn_id(*tok, format));
    EXPECT_LT(std::count(trained.begin(), trained.end(), end_of_turn_id(*tok, format)), 2);
  }
}

// TRL's datasets: a prompt string with one-message answer lists is one user message; a prompt
// string beside whole conversations (UltraFeedback style) is ignored for the shared start, as TRL does.
TEST(PreferencePairs, PromptStringWithMessageLists) {
  MT_REQUIRE_DATA(kQwen3);
  const Tokenizer& tok = shared_tokenizer(kQwen3);
  const std::string one =
      R"({"prompt": "Who is the ferryman?", "chosen": [{"role": "assistant", "content": "Odo."}],)"
      R"( "rejected": [{"role": "assistant", "content": "Mira."}]})";
  const std::string whole =
      R"({"prompt": "Who is the ferryman?", "chosen": [{"role": "user", "content": "Who is the ferryman?"},)"
      R"( {"role": "assistant", "content": "Odo."}], "rejected": [{"role": "user", "content": "Who is the ferryman?"},)"
      R"( {"role": "assistant", "content": "Mira."}]})";
  const std::string listed =
      R"({"prompt": [{"role": "user", "content": "Who is the ferryman?"}], "chosen": [{"role": "assistant", "content": "Odo."}],)"
      R"( "rejected": [{"role": "assistant", "content": "Mira."}]})";
  const PreferenceSet set = parse_preference_pairs(one + "\n" + whole + "\n" + listed + "\n", "t.jsonl", tok, quiet());
  EXPECT_EQ(set.format, DataFormat::kChatml);
  EXPECT_EQ(set.skipped, 0);
  ASSERT_EQ(set.pairs(), 3u);
  const Example want = render_conversation(tok, {{"user", "Who is the ferryman?"}, {"assistant", "Odo."}}, DataFormat::kChatml);
  for (size_t p = 0; p < 3; ++p) {
    SCOPED_TRACE(p);
    EXPECT_EQ(set.sequences[2 * p].tokens, want.tokens);
    EXPECT_EQ(set.sequences[2 * p].trained, want.trained);
    EXPECT_EQ(tok.decode(trained_ids(set.sequences[2 * p + 1])), "<think>\n\n</think>\n\nMira.<|im_end|>");
    EXPECT_EQ(tok.decode(set.sequences[2 * p + 1].tokens),
              "<|im_start|>user\nWho is the ferryman?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nMira.<|im_end|>\n");
  }
  // With format chat the same file is rendered with the Llama 3 template on a Llama 3 tokenizer.
  if (std::filesystem::exists(data_dir() + kLlama3)) {
    const Tokenizer& llama = shared_tokenizer(kLlama3);
    const PreferenceSet chat = parse_preference_pairs(one, "t.jsonl", llama, quiet(DataFormat::kChat));
    EXPECT_EQ(llama.decode(trained_ids(chat.sequences[0])), "Odo.<|eot_id|>");
  }
}

// The trailing "\n" after <|im_end|> is the template's, outside the answer: untrained, and the
// <|im_end|> before it trained (what the model learns to stop with).
TEST(PreferencePairs, EndOfTurnIsTrainedAndItsNewlineIsNot) {
  MT_REQUIRE_DATA(kQwen3);
  const Tokenizer& tok = shared_tokenizer(kQwen3);
  const PreferenceSet set = parse_preference_pairs(kImplicit, "hh.jsonl", tok, quiet());
  const Example& ex = set.sequences[0];
  ASSERT_GE(ex.tokens.size(), 2u);
  EXPECT_EQ(ex.tokens[ex.tokens.size() - 2], end_of_turn_id(tok, DataFormat::kChatml));
  EXPECT_EQ(ex.trained[ex.trained.size() - 2], 1);
  EXPECT_EQ(ex.trained.back(), 0);
}

// A ChatML template without Qwen3's reasoning block (Qwen2.5's) encodes "assistant\n" and the answer
// as one text: an answer starting with a newline merges with the header's, so the prompt's tokens
// are not a prefix of the conversation's and the prompt cannot be masked: an error naming the record.
TEST(PreferencePairs, PromptThatIsNotAPrefixIsAnError) {
  MT_REQUIRE_DATA(kQwen3);
  auto tok = load_tokenizer(data_dir() + kQwen3);
  tok->set_chat_template(  // ChatML, no <think>
      "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
      "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}");
  const std::string good =
      R"({"prompt": "Who rows?", "chosen": [{"role": "assistant", "content": "Odo."}], "rejected": [{"role": "assistant", "content": "Me."}]})";
  const PreferenceSet set = parse_preference_pairs(good, "q.jsonl", *tok, quiet());
  EXPECT_EQ(tok->decode(trained_ids(set.sequences[0])), "Odo.<|im_end|>");
  const std::string bad =
      R"({"prompt": "Who rows?", "chosen": [{"role": "assistant", "content": "\n\nOdo."}], "rejected": [{"role": "assistant", "content": "Me."}]})";
  const std::string msg = error_of([&] { parse_preference_pairs(good + "\n" + bad + "\n", "q.jsonl", *tok, quiet()); });
  EXPECT_NE(msg.find("data file 'q.jsonl': line 2: the chatml rendering of the chosen conversation does not start "
                     "with the rendering of its prompt"),
            std::string::npos)
      << msg;
}

// TRL's rule on a pair whose prompt + longer answer exceed max_length: the prompt is cut to
// max_prompt_length (keep_end: its last tokens; keep_start: its first), then each answer longer than
// max_length - max_prompt_length loses its end. The byte tokenizer makes every token a character.
TEST(PreferencePairs, TruncationKeepEndAndKeepStart) {
  ByteTokenizer tok;
  const std::string text =
      R"({"prompt": "0123456789", "chosen": "abcdefghijklmnopqrst", "rejected": "xyz"})" "\n"
      R"({"prompt": "0123456789", "chosen": "abcdefghijkl", "rejected": "uvwxyz"})" "\n"
      R"({"prompt": "0123", "chosen": "abcdefghijkl", "rejected": "uv"})" "\n";
  PreferenceOptions opt = quiet();
  opt.max_length = 16;
  opt.max_prompt_length = 4;
  const PreferenceSet end = parse_preference_pairs(text, "t.jsonl", tok, opt);
  ASSERT_EQ(end.pairs(), 3u);
  EXPECT_EQ(end.truncated, 2);
  EXPECT_EQ(end.skipped, 0);
  EXPECT_EQ(end.warning, "warning: data file 't.jsonl': 2 pairs truncated to 16 tokens");
  // 10 + 20 > 16: the prompt keeps its last 4; 4 + 20 > 16: answers cut to 16 - 4 = 12.
  EXPECT_EQ(tok.decode(end.sequences[0].tokens), "6789abcdefghijkl");
  EXPECT_EQ(end.sequences[0].trained, mask(4, 12));
  EXPECT_EQ(tok.decode(end.sequences[1].tokens), "6789xyz");  // the shorter answer is whole
  EXPECT_EQ(end.sequences[1].trained, mask(4, 3));
  // 10 + 12 > 16: the prompt keeps its last 4, and then 4 + 12 fits.
  EXPECT_EQ(tok.decode(end.sequences[2].tokens), "6789abcdefghijkl");
  EXPECT_EQ(tok.decode(end.sequences[3].tokens), "6789uvwxyz");
  // 4 + 12 = 16 fits: untouched.
  EXPECT_EQ(tok.decode(end.sequences[4].tokens), "0123abcdefghijkl");

  opt.truncation = TruncationMode::kKeepStart;
  const PreferenceSet start = parse_preference_pairs(text, "t.jsonl", tok, opt);
  EXPECT_EQ(start.truncated, 2);
  EXPECT_EQ(tok.decode(start.sequences[0].tokens), "0123abcdefghijkl");
  EXPECT_EQ(tok.decode(start.sequences[1].tokens), "0123xyz");
  EXPECT_EQ(tok.decode(start.sequences[3].tokens), "0123uvwxyz");

  // max_prompt_length 0: a quarter of max_length, 28 / 4 = 7.
  opt.max_length = 28;
  opt.max_prompt_length = 0;
  const PreferenceSet quarter = parse_preference_pairs(text, "t.jsonl", tok, opt);
  EXPECT_EQ(quarter.truncated, 1);
  // 10 + 20 > 28: the prompt keeps its first 7; 7 + 20 fits.
  EXPECT_EQ(tok.decode(quarter.sequences[0].tokens), "0123456abcdefghijklmnopqrst");
  EXPECT_EQ(tok.decode(quarter.sequences[2].tokens), "0123456789abcdefghijkl");
}

// On a tokenizer with BOS and EOS: keep_end drops the BOS with the prompt's start (as TRL does), and
// a cut answer loses its EOS.
TEST(PreferencePairs, TruncationCountsTokensWithBosAndEos) {
  MT_REQUIRE_DATA(kLlama3);
  const Tokenizer& tok = shared_tokenizer(kLlama3);
  const std::string prompt = "One two three four five six seven eight nine ten eleven twelve.";
  const std::string chosen = " Alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu.";
  const std::string rejected = " No.";
  const Ids p = concat({{tok.bos_id()}, tok.encode(prompt)});
  const Ids c = concat({tok.encode(chosen), {tok.eos_id()}});
  const Ids r = concat({tok.encode(rejected), {tok.eos_id()}});
  ASSERT_GT(p.size(), 8u);
  ASSERT_GT(c.size(), 12u);
  const std::string rec = R"({"prompt": ")" + prompt + R"(", "chosen": ")" + chosen + R"(", "rejected": ")" + rejected + R"("})";
  PreferenceOptions opt = quiet();
  opt.max_length = 20;
  opt.max_prompt_length = 8;
  for (TruncationMode mode : {TruncationMode::kKeepEnd, TruncationMode::kKeepStart}) {
    opt.truncation = mode;
    const PreferenceSet set = parse_preference_pairs(rec, "t.jsonl", tok, opt);
    ASSERT_EQ(set.pairs(), 1u);
    EXPECT_EQ(set.truncated, 1);
    const Ids kept = mode == TruncationMode::kKeepEnd ? Ids(p.end() - 8, p.end()) : Ids(p.begin(), p.begin() + 8);
    EXPECT_EQ(set.sequences[0].tokens, concat({kept, Ids(c.begin(), c.begin() + 12)}));
    EXPECT_EQ(set.sequences[0].trained, mask(8, 12));
    EXPECT_EQ(set.sequences[1].tokens, concat({kept, r}));
    EXPECT_EQ(set.sequences[1].trained, mask(8, r.size()));
  }
}

TEST(PreferencePairs, TruncationOptions) {
  EXPECT_EQ(parse_truncation_mode("keep_end"), TruncationMode::kKeepEnd);
  EXPECT_EQ(parse_truncation_mode("keep_start"), TruncationMode::kKeepStart);
  EXPECT_EQ(truncation_mode_name(TruncationMode::kKeepStart), "keep_start");
  std::string msg = error_of([] { parse_truncation_mode("keep_middle"); });
  EXPECT_NE(msg.find("'keep_middle'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("keep_end or keep_start"), std::string::npos) << msg;
  ByteTokenizer tok;
  PreferenceOptions opt = quiet();
  opt.max_length = 16;
  opt.max_prompt_length = 16;
  msg = error_of([&] { parse_preference_pairs(kStringPair, "t.jsonl", tok, opt); });
  EXPECT_NE(msg.find("max_prompt_length 16 must be less than max_length 16"), std::string::npos) << msg;
}

TEST(PreferencePairs, BadRecordsAreSkippedAndCounted) {
  TempDir dir("pref_bad_records");
  const std::string path = dir.file(
      "bad.jsonl",
      R"({"prompt": "Q1", "chosen": "good", "rejected": "bad"})" "\n"
      R"({"prompt": "Q2", "chosen": "good"})" "\n"
      R"({"prompt": "Q3", "chosen": 7, "rejected": "bad"})" "\n"
      R"({"prompt": "Q4", "chosen": "", "rejected": "bad"})" "\n"
      R"({"prompt": "Q5", "chosen": "good", "rejected": ["not", "messages"]})" "\n"
      R"({"chosen": "no prompt", "rejected": "bad"})" "\n"
      R"({"prompt": "Q7", "chosen": [{"role": "assistant", "content": "a list"}], "rejected": "bad"})" "\n"
      R"({"prompt": "Q8", "chosen": "fine", "rejected": "also fine, but the longest answer here"})" "\n");
  ByteTokenizer tok;
  PreferenceOptions opt;
  opt.format = DataFormat::kAlpaca;
  opt.max_length = 150;  // the Alpaca prompt is 140 bytes + the question: pair 8 is truncated
  opt.max_prompt_length = 140;
  ::testing::internal::CaptureStderr();
  const PreferenceSet set = read_preference_pairs(path, tok, opt);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(set.records, 8);
  EXPECT_EQ(set.skipped, 6);
  EXPECT_EQ(set.truncated, 1);
  EXPECT_EQ(set.pairs(), 2u);
  EXPECT_EQ(set.warning, "warning: data file '" + path +
                             "': 6 of 8 records skipped (first: line 2: \"rejected\" is missing); "
                             "1 pairs truncated to 150 tokens");
  EXPECT_EQ(err, set.warning + "\n");  // printed once
  EXPECT_EQ(tok.decode(trained_ids(set.sequences[3])), "also fine,");

  // Each reason, as the first skip of a file of its own.
  auto first_skip = [&](const std::string& rec, const std::string& name = "one.jsonl") {
    const std::string text = std::string(R"({"prompt": "ok", "chosen": "yes", "rejected": "no"})") + "\n" + rec + "\n";
    const std::string w = parse_preference_pairs(text, name, tok, quiet()).warning;
    const size_t at = w.find("(first: ");
    return at == std::string::npos ? w : w.substr(at + 8, w.size() - at - 9);
  };
  EXPECT_EQ(first_skip(R"({"prompt": "Q", "chosen": 7, "rejected": "bad"})"), "line 2: \"chosen\" is not a string");
  EXPECT_EQ(first_skip(R"({"prompt": "Q", "chosen": "", "rejected": "bad"})"), "line 2: \"chosen\" is empty");
  // A record that is not an object is not a skip: the file is not one of records.
  EXPECT_NE(error_of([&] { first_skip("[1, 2]"); }).find("one.jsonl': line 2 is an array, not a JSON object"),
            std::string::npos);
  EXPECT_EQ(first_skip(R"({"chosen": "x", "rejected": "y"})"), "line 2: \"prompt\" is missing (a pair of strings needs one)");
  EXPECT_NE(first_skip(R"({"prompt": "Q", "chosen": [{"role": "assistant", "content": "x"}], "rejected": "y"})")
                .find("message lists in a file read as plain text"),
            std::string::npos);
}

TEST(PreferencePairs, BadConversationsAreSkipped) {
  MT_REQUIRE_DATA(kLlama3);
  const Tokenizer& tok = shared_tokenizer(kLlama3);
  auto first_skip = [&](const std::string& rec) {
    const std::string good =
        R"({"chosen": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}],)"
        R"( "rejected": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "B"}]})";
    const PreferenceSet set = parse_preference_pairs(good + "\n" + rec + "\n", "c.jsonl", tok, quiet());
    EXPECT_EQ(set.skipped, 1) << rec;
    const std::string& w = set.warning;
    const size_t at = w.find("(first: ");
    return at == std::string::npos ? w : w.substr(at + 8, w.size() - at - 9);
  };
  // Identical conversations: nothing left after the shared prompt.
  EXPECT_EQ(first_skip(R"({"chosen": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}],)"
                       R"( "rejected": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}]})"),
            "line 2: the chosen completion is empty (no messages after the prompt)");
  // An empty answer trains only an end-of-turn token.
  EXPECT_EQ(first_skip(R"({"prompt": [{"role": "user", "content": "Q"}], "chosen": [{"role": "assistant", "content": ""}],)"
                       R"( "rejected": [{"role": "assistant", "content": "B"}]})"),
            "line 2: the chosen completion is empty (no assistant text)");
  // The answers differ from their first message on: the "completion" is a user turn.
  EXPECT_EQ(first_skip(R"({"chosen": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}],)"
                       R"( "rejected": [{"role": "user", "content": "R"}, {"role": "assistant", "content": "B"}]})"),
            "line 2: the chosen completion starts with a user message, not an assistant message");
  EXPECT_EQ(first_skip(R"({"prompt": [{"role": "user", "content": "Q"}], "chosen": [{"role": "robot", "content": "A"}],)"
                       R"( "rejected": [{"role": "assistant", "content": "B"}]})"),
            "line 2: \"chosen\" message 1: unknown role \"robot\" (expected system, user or assistant)");
  EXPECT_EQ(first_skip(R"({"prompt": [{"role": "user", "content": "Q"}], "chosen": [{"role": "assistant", "content": ["x"]}],)"
                       R"( "rejected": [{"role": "assistant", "content": "B"}]})"),
            "line 2: \"chosen\" message 1: \"content\" is not a string");
  EXPECT_EQ(first_skip(R"({"prompt": [{"role": "user", "content": "Q"}], "chosen": [], "rejected": [{"role": "assistant", "content": "B"}]})"),
            "line 2: \"chosen\" is an empty message list");
  EXPECT_EQ(first_skip(R"({"prompt": [{"role": "user", "content": "Q"}], "chosen": "A", "rejected": [{"role": "assistant", "content": "B"}]})"),
            "line 2: \"chosen\" is not a message list (the record's other fields are)");
}

TEST(PreferencePairs, NotAPreferenceFileIsAnError) {
  TempDir dir("pref_not_pairs");
  ByteTokenizer tok;
  const std::string path = dir.file("alpaca.jsonl", R"({"instruction": "Say hi.", "input": "", "output": "Hi!"})" "\n");
  const std::string msg = error_of([&] { read_preference_pairs(path, tok); });
  EXPECT_NE(msg.find("data file '" + path + "'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("a preference record needs \"chosen\" and \"rejected\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"prompt\""), std::string::npos) << msg;
  // Pairs, but none usable.
  const std::string none = dir.file("none.jsonl", R"({"chosen": "x", "rejected": "y"})" "\n");
  const std::string msg2 = error_of([&] { read_preference_pairs(none, tok, quiet()); });
  EXPECT_NE(msg2.find("no usable preference pairs (1 of 1 records skipped; first: line 1: \"prompt\" is missing"),
            std::string::npos) << msg2;
  EXPECT_NE(error_of([&] { read_preference_pairs(dir.path("absent.jsonl"), tok); }).find("does not exist"), std::string::npos);
  EXPECT_NE(error_of([&] { read_preference_pairs(dir.file("e.jsonl", "\n \n"), tok); }).find("is empty"), std::string::npos);
}

TEST(PreferencePairs, ChatFileNeedsTheTemplatesTokens) {
  ByteTokenizer tok;
  const std::string msg = error_of([&] { parse_preference_pairs(kImplicit, "hh.jsonl", tok, quiet()); });
  EXPECT_NE(msg.find("data file 'hh.jsonl'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("byte tokenizer"), std::string::npos) << msg;
}

TEST(PreferencePairs, MalformedJsonNamesFileAndLine) {
  TempDir dir("pref_malformed");
  ByteTokenizer tok;
  std::string p = dir.file("m.jsonl", kStringPair + "\n" + kStringPair + "\n{\"prompt\": \"a\", \n");
  std::string msg = error_of([&] { read_preference_pairs(p, tok); });
  EXPECT_NE(msg.find("data file '" + p + "': line 3: not valid JSON"), std::string::npos) << msg;
  p = dir.file("m.json", "[" + kStringPair + ", {\"prompt\": ]");
  msg = error_of([&] { read_preference_pairs(p, tok); });
  EXPECT_NE(msg.find("data file '" + p + "'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("malformed JSON at byte offset"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

TEST(PreferencePairs, JsonArrayAndJsonLinesGiveTheSamePairs) {
  TempDir dir("pref_forms");
  ByteTokenizer tok;
  const std::string a = R"({"prompt": "Q1", "chosen": "yes", "rejected": "no"})";
  const std::string b = R"({"prompt": "Q2", "chosen": "right", "rejected": "wrong", "score_chosen": 9.5})";
  const PreferenceSet lines = read_preference_pairs(dir.file("d.jsonl", a + "\n\n" + b + "\n"), tok);
  const PreferenceSet array = read_preference_pairs(dir.file("d.json", "[\n" + a + ",\n" + b + "\n]\n"), tok);
  const PreferenceSet json_lines = read_preference_pairs(dir.file("l.json", a + "\n" + b), tok);
  ASSERT_EQ(lines.pairs(), 2u);
  ASSERT_EQ(array.sequences.size(), 4u);
  ASSERT_EQ(json_lines.sequences.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(lines.sequences[i].tokens, array.sequences[i].tokens);
    EXPECT_EQ(lines.sequences[i].trained, array.sequences[i].trained);
    EXPECT_EQ(json_lines.sequences[i].tokens, array.sequences[i].tokens);
  }
  EXPECT_EQ(tok.decode(array.sequences[2].tokens), "Q2right");
  EXPECT_EQ(tok.decode(array.sequences[3].tokens), "Q2wrong");
  EXPECT_EQ(array.sequences[3].trained, mask(2, 5));
}

TEST(PreferencePairs, IsPreferenceFile) {
  TempDir dir("pref_is_file");
  EXPECT_TRUE(is_preference_file(dir.file("p.jsonl", kStringPair + "\n")));
  EXPECT_TRUE(is_preference_file(dir.file("p.json", "[" + kStringPair + "]")));
  EXPECT_TRUE(is_preference_file(dir.file("hh.jsonl", kImplicit + "\n")));
  // The first record decides; one that is not an object means the file is not one of records.
  EXPECT_NE(error_of([&] { is_preference_file(dir.file("late.jsonl", "[1]\n" + kStringPair + "\n")); })
                .find("late.jsonl': line 1 is an array, not a JSON object"),
            std::string::npos);
  EXPECT_FALSE(is_preference_file(dir.file("a.jsonl", R"({"instruction": "a", "output": "b"})" "\n" + kStringPair + "\n")));
  EXPECT_FALSE(is_preference_file(dir.file("c.json", R"([{"messages": [{"role": "user", "content": "hi"}]}])")));
  EXPECT_FALSE(is_preference_file(dir.file("half.jsonl", R"({"prompt": "a", "chosen": "b"})" "\n")));
  EXPECT_FALSE(is_preference_file(dir.file("text.txt", kStringPair + "\n")));
  EXPECT_FALSE(is_preference_file(dir.file("empty.jsonl", "")));
  EXPECT_NE(error_of([&] { is_preference_file(dir.path("absent.jsonl")); }).find("does not exist"), std::string::npos);
  EXPECT_NE(error_of([&] { is_preference_file(dir.file("bad.jsonl", "{oops\n")); }).find("line 1: not valid JSON"),
            std::string::npos);
}

TEST(PreferencePairs, FileFormatWithoutTokenizing) {
  TempDir dir("pref_file_format");
  const std::string strings = dir.file("s.jsonl", kStringPair + "\n");
  const std::string chat = dir.file("c.json", "[" + kImplicit + "]");
  EXPECT_EQ(preference_file_format(strings), DataFormat::kAuto);
  EXPECT_EQ(preference_file_format(chat), DataFormat::kChat);
  ByteTokenizer bytes;
  EXPECT_EQ(preference_file_format(strings, &bytes), read_preference_pairs(strings, bytes, quiet()).format);
  if (std::filesystem::exists(data_dir() + kQwen3)) {
    const Tokenizer& qwen = shared_tokenizer(kQwen3);
    EXPECT_EQ(preference_file_format(chat, &qwen), DataFormat::kChatml);
    EXPECT_EQ(preference_file_format(chat, &qwen), read_preference_pairs(chat, qwen, quiet()).format);
  }
  const std::string alpaca = dir.file("a.jsonl", R"({"instruction": "a", "output": "b"})" "\n");
  EXPECT_NE(error_of([&] { preference_file_format(alpaca); }).find("a preference record needs"), std::string::npos);
  EXPECT_NE(error_of([&] { preference_file_format(dir.file("e.json", "")); }).find("is empty"), std::string::npos);
}

// The bundled example data: village Q&A preference pairs, fit for the byte tokenizer's seq_len 384.
TEST(PreferencePairs, BundledVillagePrefs) {
  const std::string path = std::string(MESHTRAIN_SOURCE_DIR) + "/examples/village_prefs.jsonl";
  EXPECT_TRUE(is_preference_file(path));
  ByteTokenizer tok;
  PreferenceOptions opt;
  opt.format = DataFormat::kAlpaca;
  opt.max_length = 384;
  const PreferenceSet set = read_preference_pairs(path, tok, opt);
  EXPECT_EQ(set.skipped, 0) << set.warning;
  EXPECT_EQ(set.truncated, 0) << set.warning;
  EXPECT_EQ(set.warning, "");
  EXPECT_GE(set.pairs(), 50u);
  EXPECT_EQ(int64_t(set.pairs()), set.records);
  for (size_t p = 0; p < set.pairs(); ++p) {
    const Example& c = set.sequences[2 * p];
    const Example& r = set.sequences[2 * p + 1];
    EXPECT_EQ(prompt_of(c), prompt_of(r));
    EXPECT_NE(c.tokens, r.tokens);
    EXPECT_LE(c.tokens.size(), 384u);
    EXPECT_LE(r.tokens.size(), 384u);
  }
}

}  // namespace
}  // namespace mt
