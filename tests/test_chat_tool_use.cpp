// Agent / tool-use training data (docs/data.md, "Tool use and reasoning"): a JSONL record of the
// messages format with tools, tool calls, tool results and reasoning_content, read by
// read_examples with the real Qwen3 tokenizer and its own chat_template, gives the ids of Hugging
// Face's rendering of the same conversation (tests/data/chat_templates/renderings.json, case "tool
// use to train on") with exactly the assistant turns trained; ShareGPT's function_call /
// observation turns render as the same messages; other keys reach the template as the values they
// are; the built-in templates refuse what they cannot write in one line; a template that writes
// the date keys the token cache by the day.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "data/chat_jinja.h"
#include "data/chat_templates.h"
#include "data/examples.h"
#include "data/tokenizer.h"
#include "error_of.h"
#include "temp_dirs.h"

namespace mt {
namespace {

namespace fs = std::filesystem;
using Ids = std::vector<int32_t>;
using ordered_json = nlohmann::ordered_json;

const std::string kRoot = MESHTRAIN_SOURCE_DIR;
const std::string kQwen3 = kRoot + "/../shared/data/tokenizers/qwen3";

#define REQUIRE_QWEN3() \
  if (!fs::exists(kQwen3 + "/tokenizer.json")) GTEST_SKIP() << "shared data missing: " << kQwen3

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The case of renderings.json rendered by `tmpl` (keys in the file's order).
ordered_json reference_case(const std::string& tmpl, const std::string& name) {
  const ordered_json doc = ordered_json::parse(read_text(kRoot + "/tests/data/chat_templates/renderings.json"));
  for (const auto& c : doc["cases"])
    if (c["template"] == tmpl && c["name"] == name) return c;
  ADD_FAILURE() << "no case " << tmpl << " / " << name;
  return {};
}

ExampleSet read_quietly(const std::string& path, const Tokenizer& tok) {
  ExampleOptions opt;
  opt.quiet = true;
  return read_examples(path, tok, opt);
}

// The ids of `text` with the spans from each "<|im_start|>assistant\n" to its "<|im_end|>"
// (included) trained: what the mask must be. The boundaries are special tokens or an added token
// (<think>), so encoding the pieces apart gives the ids of the whole.
Example expected_example(const Tokenizer& tok, const std::string& text) {
  Example ex;
  auto add = [&](const std::string& piece, bool trained) {
    const Ids ids = tok.encode_with_specials(piece);
    ex.tokens.insert(ex.tokens.end(), ids.begin(), ids.end());
    ex.trained.insert(ex.trained.end(), ids.size(), trained ? 1 : 0);
  };
  const std::string open = "<|im_start|>assistant\n", close = "<|im_end|>";
  size_t at = 0;
  for (size_t b = text.find(open); b != std::string::npos; b = text.find(open, at)) {
    const size_t e = text.find(close, b) + close.size();
    add(text.substr(at, b + open.size() - at), false);
    add(text.substr(b + open.size(), e - b - open.size()), true);
    at = e;
  }
  add(text.substr(at), false);
  return ex;
}

TEST(ChatToolUse, AToolUseRecordRendersAsHuggingFacesWithTheAnswersTrained) {
  REQUIRE_QWEN3();
  const std::unique_ptr<Tokenizer> tok = load_tokenizer(kQwen3);
  const ordered_json c = reference_case("qwen3", "tool use to train on");
  ASSERT_TRUE(c.contains("rendered"));
  const std::string rendered = c["rendered"];
  // The reference renders the arguments in the record's key order ("days" before "city").
  ASSERT_NE(rendered.find(R"("arguments": {"days": 1, "city": "Bern"})"), std::string::npos);
  testing::TempDir dir("chat_tool_use_qwen3");
  const ordered_json record = {{"messages", c["context"]["messages"]}, {"tools", c["context"]["tools"]}};
  const ExampleSet set = read_quietly(dir.file("agent.jsonl", record.dump() + "\n"), *tok);
  ASSERT_EQ(set.examples.size(), 1u) << set.warning;
  const Example want = expected_example(*tok, rendered);
  EXPECT_EQ(set.examples[0].tokens, want.tokens) << tok->decode(set.examples[0].tokens);
  EXPECT_EQ(set.examples[0].trained, want.trained);
  // Both answers are trained: the first is its reasoning and its call.
  Ids trained;
  for (size_t i = 0; i < want.tokens.size(); ++i)
    if (want.trained[i]) trained.push_back(want.tokens[i]);
  EXPECT_EQ(tok->decode(trained),
            "<think>\nThe user wants tomorrow's weather in Bern: call the tool.\n</think>\n\n<tool_call>\n"
            "{\"name\": \"get_weather\", \"arguments\": {\"days\": 1, \"city\": \"Bern\"}}\n</tool_call><|im_end|>"
            "<think>\nThe tool says fog and 4 degrees.\n</think>\n\nFoggy and 4 °C in Bern tomorrow.<|im_end|>");
}

// LLaMA-Factory's ShareGPT shape of the same conversation (no reasoning): function_call and
// observation turns and tools as a JSON string, rendered with Qwen2.5's template as the messages.
TEST(ChatToolUse, ShareGptFunctionCallsRenderAsTheMessagesFormat) {
  REQUIRE_QWEN3();
  std::unique_ptr<Tokenizer> tok = load_tokenizer(kQwen3);
  tok->set_chat_template(read_text(kRoot + "/tests/data/hf_families/qwen2.5_chat_template.jinja"));
  const ordered_json c = reference_case("qwen2.5", "tool use to train on");
  ASSERT_TRUE(c.contains("rendered"));
  const ordered_json& m = c["context"]["messages"];
  const ordered_json call = m[2]["tool_calls"][0]["function"];
  const ordered_json record = {
      {"conversations",
       {{{"from", "system"}, {"value", m[0]["content"]}},
        {{"from", "human"}, {"value", m[1]["content"]}},
        {{"from", "function_call"}, {"value", call.dump()}},
        {{"from", "observation"}, {"value", m[3]["content"]}},
        {{"from", "gpt"}, {"value", m[4]["content"]}}}},
      {"tools", c["context"]["tools"].dump()}};
  testing::TempDir dir("chat_tool_use_sharegpt");
  const ExampleSet set = read_quietly(dir.file("agent.jsonl", record.dump() + "\n"), *tok);
  ASSERT_EQ(set.examples.size(), 1u) << set.warning;
  const Example want = expected_example(*tok, c["rendered"].get<std::string>());
  EXPECT_EQ(set.examples[0].tokens, want.tokens) << tok->decode(set.examples[0].tokens);
  EXPECT_EQ(set.examples[0].trained, want.trained);
}

// Keys the formats do not name reach the template as the JSON values they are (numbers, objects
// in order, null); an assistant turn of only tool calls may have a null content; malformed tool
// fields skip the record with the reason.
TEST(ChatToolUse, OtherKeysReachTheTemplateAsTheyAre) {
  REQUIRE_QWEN3();
  std::unique_ptr<Tokenizer> tok = load_tokenizer(kQwen3);
  tok->set_chat_template(
      "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content is none }}|{{ m.weight }}|"
      "{% if m.meta %}{{ m.meta | tojson }}{% endif %}|{% if m.tool_calls %}{{ m.tool_calls[0].function.arguments }}"
      "{% endif %}<|im_end|>{{ '\n' }}{%- endfor %}");
  testing::TempDir dir("chat_tool_use_keys");
  const std::string path = dir.file(
      "keys.jsonl",
      R"({"messages": [{"role": "user", "content": "Hi", "weight": 0.5, "meta": {"z": 1, "a": [true, null]}},)"
      R"( {"role": "assistant", "content": null, "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{\"q\": 1}"}}]}]})"
      "\n"
      R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "x", "tool_calls": {"f": 1}}]})"
      "\n"
      R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": null}]})"
      "\n");
  const ExampleSet set = read_quietly(path, *tok);
  ASSERT_EQ(set.examples.size(), 1u) << set.warning;
  EXPECT_EQ(tok->decode(set.examples[0].tokens),
            "<|im_start|>user\nFalse|0.5|{\"z\": 1, \"a\": [true, null]}|<|im_end|>\n"
            "<|im_start|>assistant\nTrue|||{\"q\": 1}<|im_end|>\n");
  EXPECT_EQ(set.skipped, 2);
  EXPECT_NE(set.warning.find("line 2: message 2: \"tool_calls\" is not a list"), std::string::npos) << set.warning;
}

// The built-in renderings know role and content only: a record with tool calls is refused in one
// line naming what and why, never rendered without them.
TEST(ChatToolUse, BuiltInTemplatesRefuseToolCallsInOneLine) {
  REQUIRE_QWEN3();
  std::unique_ptr<Tokenizer> tok = load_tokenizer(kQwen3);
  tok->set_chat_template("");  // no template of its own: the built-in chatml rendering
  testing::TempDir dir("chat_tool_use_builtin");
  const std::string path = dir.file(
      "calls.jsonl",
      R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "",)"
      R"( "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {}}}]}]})"
      "\n");
  const std::string e = error_of([&] { read_quietly(path, *tok); });
  EXPECT_NE(e.find("built-in chatml template renders role and content only, and message 2 has tool_calls"),
            std::string::npos)
      << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  EXPECT_TRUE(builtin_chat_problem({{"user", "Hi"}, {"tool", "42"}}, "").has_value());
  EXPECT_EQ(*builtin_chat_problem({{"user", "Hi"}}, "[{}]"), "the record has tools");
  EXPECT_FALSE(builtin_chat_problem({{"user", "Hi", R"({"role": "user", "content": "Hi", "name": "ann"})"}}, "")
                   .has_value());
}

// A template that writes the date (strftime_now) renders differently on another day: the token
// cache's key holds the day for it, and only for it.
TEST(ChatToolUse, TheDayKeysTheCacheOfATemplateThatWritesTheDate) {
  const long long dec7 = 1796634000;  // 2026-12-07 09:00 UTC
  EXPECT_EQ(chat_template_day("Today Date: {{ strftime_now('%d %b %Y') }}", dec7), "2026-12-07");
  EXPECT_EQ(chat_template_day("{{ strftime_now('%Y') }}", dec7 + 86400), "2026-12-08");
  EXPECT_EQ(chat_template_day("{{ strftime_now('%Y') }}", dec7 + 3600), "2026-12-07");
  EXPECT_EQ(chat_template_day("{{ messages[0].content }}", dec7), "");
}

// Templates get tokenizer_config.json's bos_token / eos_token strings (a string or an AddedToken
// object), not the text of the tokenizer's BOS / EOS ids: Qwen3's eos_token is <|im_end|>, its EOS
// id <|endoftext|>. Where the config names none (absent or null), the ids' text stands in.
TEST(ChatToolUse, TemplatesGetTheConfigsBosAndEosTokens) {
  REQUIRE_QWEN3();
  const std::string tmpl = "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
                           "{%- endfor %}[{{ bos_token }}|{{ eos_token }}]";
  const std::vector<ChatMessage> conv = {{"user", "Hi"}, {"assistant", "Yo"}};
  auto rendered = [&](const std::string& dir) {
    std::unique_ptr<Tokenizer> tok = load_tokenizer(dir);
    tok->set_chat_template(tmpl);
    const Example ex = render_conversation(*tok, conv, DataFormat::kChatml);
    const std::string text = tok->decode(ex.tokens);
    return text.substr(text.rfind('['));
  };
  // Its config: "bos_token": null (meshtrain's BOS id is <|endoftext|>), "eos_token": "<|im_end|>".
  EXPECT_EQ(rendered(kQwen3), "[<|endoftext|>|<|im_end|>]");
  testing::TempDir dir("chat_tool_use_config_tokens");
  fs::create_symlink(kQwen3 + "/tokenizer.json", dir.path("tokenizer.json"));
  dir.file("tokenizer_config.json", R"({"bos_token": {"content": "<|im_start|>", "special": true}, "eos_token": {"content": "<|endoftext|>"}})");
  EXPECT_EQ(rendered(dir.path()), "[<|im_start|>|<|endoftext|>]");
  dir.file("tokenizer_config.json", "{}");
  const std::unique_ptr<Tokenizer> plain = load_tokenizer(dir.path());
  auto text_of = [&](int32_t id) { return id >= 0 ? plain->decode({id}) : std::string(); };
  EXPECT_EQ(rendered(dir.path()), "[" + text_of(plain->bos_id()) + "|" + text_of(plain->eos_id()) + "]");
}

}  // namespace
}  // namespace mt
