// Conversations rendered through the tokenizer's own Jinja chat_template (data/chat_jinja.h):
// the ids equal the real Qwen3 tokenizer's on the reference renderings, special tokens come only
// from the template's text, the assistant mask is read from the rendering, constructs the
// interpreter lacks are named in one line (a model's template then falls back to the built-in
// rendering with a warning, a user's template is refused), and a user's data.chat_template trains
// through the binary and goes with the model to generate.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "data/chat_jinja.h"
#include "data/chat_templates.h"
#include "data/jinja/template.h"
#include "data/tokenizer.h"
#include "error_of.h"
#include "mistral_fixture.h"
#include "run_command.h"
#include "temp_dirs.h"

namespace mt {
namespace {

namespace fs = std::filesystem;
using Ids = std::vector<int32_t>;

const std::string kQwen3 = std::string(MESHTRAIN_SOURCE_DIR) + "/../shared/data/tokenizers/qwen3";
const std::string kRenderings = std::string(MESHTRAIN_SOURCE_DIR) + "/tests/data/chat_templates/renderings.json";

#define REQUIRE_QWEN3() \
  if (!fs::exists(kQwen3 + "/tokenizer.json")) GTEST_SKIP() << "shared data missing: " << kQwen3

const Tokenizer& qwen3() {
  static std::unique_ptr<Tokenizer> tok = load_tokenizer(kQwen3);
  return *tok;
}

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string trained_text(const Tokenizer& tok, const Example& ex) {
  Ids ids;
  for (size_t i = 0; i < ex.tokens.size(); ++i)
    if (ex.trained[i]) ids.push_back(ex.tokens[i]);
  return tok.decode(ids);
}

std::string parse_error(const std::string& source) {
  return error_of([&] { jinja::Template t(source); });
}

TEST(ChatJinja, UnsupportedConstructsAreNamedWithTheirLine) {
  EXPECT_EQ(parse_error("{{ bos_token }}\n{% include 'other.jinja' %}"),
            "chat template line 2: unsupported construct '{% include %}' (meshtrain's Jinja runs if, for, set, macro "
            "and generation blocks)");
  EXPECT_EQ(parse_error("a\nb\n{{ messages | wordcount }}"), "chat template line 3: unsupported filter 'wordcount'");
  EXPECT_EQ(parse_error("{% if x is prime %}{% endif %}"), "chat template line 1: unsupported test 'is prime'");
  EXPECT_EQ(parse_error("{% raw %}{{ x }}{% endraw %}"),
            "chat template line 1: unsupported construct '{% raw %}' (meshtrain's Jinja runs if, for, set, macro and "
            "generation blocks)");
  EXPECT_EQ(parse_error("{% for m in messages %}{{ m }}"), "chat template line 1: the template ends before 'else' or 'endfor'");
  EXPECT_EQ(parse_error("{{ 'open }}"), "chat template line 1: a tag opened with '{{' is never closed");
  EXPECT_EQ(parse_error("{% for x in y recursive %}{% endfor %}"),
            "chat template line 1: unsupported construct 'for ... recursive'");
  // A method no template uses fails when called, naming it.
  const jinja::Template t("{{ 'abc'.zfill(5) }}");
  EXPECT_EQ(error_of([&] { t.render({}); }), "chat template line 1: unsupported call of method 'zfill' (undefined)");
  const jinja::Template refuse("{{ raise_exception('Roles must alternate') }}");
  EXPECT_EQ(error_of([&] { refuse.render({}); }), "the chat template refuses this conversation: Roles must alternate");
}

// A tokenizer_config.json is data from anywhere: a template that nests past any real one, recurses
// or asks for huge ranges is one error line, not a stack overflow or a hang.
TEST(ChatJinja, HostileTemplatesFailInOneLine) {
  EXPECT_EQ(parse_error("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}"),
            "chat template line 1: nested more than 100 levels deep");
  std::string ifs;
  for (int i = 0; i < 1000; ++i) ifs += "{% if true %}";
  EXPECT_EQ(parse_error(ifs), "chat template line 1: nested more than 100 levels deep");
  EXPECT_EQ(parse_error("{{ " + std::string(5000, '-') + "1 }}"), "chat template line 1: nested more than 100 levels deep");
  const jinja::Template recursive("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}");
  EXPECT_EQ(error_of([&] { recursive.render({}); }), "chat template line 1: macro 'f' calls nested more than 50 deep");
  const jinja::Template huge("{% for i in range(1000000000) %}x{% endfor %}");
  EXPECT_EQ(error_of([&] { huge.render({}); }), "chat template: range() of more than 100000 items");
  const jinja::Template repeat("{{ 'x' * 100000000 }}");
  EXPECT_EQ(error_of([&] { repeat.render({}); }), "chat template line 1: a string repeated to more than 16 MiB");
}

// Whitespace control (trim_blocks, lstrip_blocks, -, +), printing, operators, slices, string
// methods and filters as Python's jinja2 renders them with transformers' settings (the expected
// texts were rendered by jinja2 3.1.6 that way).
TEST(ChatJinja, RendersAsPythonsJinja2) {
  const std::pair<const char*, const char*> cases[] = {
      {"{% if a %}\n    {% if b %}\n  x\n    {% endif %}\n{% endif %}\n",
       "  x\n"},
      {"a {% if a %}  b  {% endif %}  c\n\n",
       "a   b    c\n"},
      {"  {{ a }}\n  {% if a %}\nq{%+ if a %}r{% endif %}\n{# c #}\n  z{% endif %}",
       "  True\nqr  z"},
      {"{%- if a -%}\n  A  \n{%- endif %}\nB {{- ' C ' -}} D\n",
       "AB C D"},
      {"{% for x in [1,2] %}\n  {{ x }}\n{% endfor %}\n",
       "  1\n  2\n"},
      {"{{ [1, 'a', none, true, 1.5, {'k': [2]}] }}|{{ 3 // 2 }}|{{ -7 % 3 }}|{{ 'abc'[::-1] }}|{{ 'a,b,,c'.split(',') | join('+') }}|{{ '  x y  '.split() }}|{{ 'x' ~ 1 ~ none }}|{{ 1 if none else 2 }}|{{ 'Hello World' | lower | title }}|{{ [3,1,3] | unique | list }}|{{ 'x' * 3 }}|{{ range(3) | list }}|{{ 'x\\ny' | indent(2) }}|{{ 1.0 }}|{{ 2.5e-7 }}|{{ 1e20 }}|{{ {'a': 'é\\n\"'} | tojson }}|{{ [1,[2]] | tojson(indent=2) }}",
       "[1, 'a', None, True, 1.5, {'k': [2]}]|1|2|cba|a+b++c|['x', 'y']|x1None|2|Hello World|[3, 1]|xxx|[0, 1, 2]|x\n  y|1.0|2.5e-07|1e+20|{\"a\": \"é\\n\\\"\"}|[\n  1,\n  [\n    2\n  ]\n]"},
  };
  jinja::Dict ctx;
  ctx.set("a", jinja::Value::boolean(true));
  ctx.set("b", jinja::Value::boolean(true));
  for (const auto& [source, want] : cases) EXPECT_EQ(jinja::Template(source).render(ctx).text.s, want) << source;
}

// Text a template writes is marked as its own; text read from messages[i] carries i, through
// concatenation, filters and slicing; {% generation %} blocks are recorded.
TEST(ChatJinja, TheRenderingKnowsWhereEachByteCameFrom) {
  const jinja::Template t(
      "{% for m in messages %}<{{ m.role }}>{% generation %}{{ (m.content | trim)[1:] }}{% endgeneration %}"
      "{% endfor %}");
  jinja::Dict ctx;
  ctx.set("messages", jinja::from_json(nlohmann::ordered_json::parse(R"([{"role": "user", "content": " xab "}])"), 0));
  const jinja::Rendered r = t.render(ctx);
  EXPECT_EQ(r.text.s, "<user>ab");
  EXPECT_EQ(r.text.from, (std::vector<int32_t>{-1, 0, 0, 0, 0, -1, 0, 0}));
  ASSERT_EQ(r.generation.size(), 1u);
  EXPECT_EQ(r.generation[0], std::make_pair(size_t{6}, size_t{8}));
  EXPECT_TRUE(t.has_generation());
}

// The ids of each plain conversation of the corpus, rendered by Qwen3's own template through
// render_conversation / conversation_prompt, equal the real Qwen3 tokenizer's ids of the
// reference rendering (@huggingface/jinja's, or Python jinja2's where they differ).
TEST(ChatJinja, IdsEqualTokenizingTheReferenceRendering) {
  REQUIRE_QWEN3();
  const Tokenizer& tok = qwen3();
  const nlohmann::json doc = nlohmann::json::parse(read_text(kRenderings));
  int checked = 0;
  for (const auto& c : doc["cases"]) {
    if (c["template"] != "qwen3" || c["context"].contains("tools") || c["context"].contains("enable_thinking")) continue;
    std::vector<ChatMessage> messages;
    bool plain = true;
    for (const auto& m : c["context"]["messages"]) {
      plain = plain && m.size() == 2;
      messages.push_back({m["role"], m["content"]});
    }
    // Data that spells special tokens is tokenized as text by meshtrain, not by encode_with_specials.
    if (!plain || c["name"] == "template-like text in the data") continue;
    SCOPED_TRACE(c["name"].get<std::string>());
    const std::string text = c.contains("python_rendered") ? c["python_rendered"] : c["rendered"];
    const Ids want = tok.encode_with_specials(text);
    if (c["context"]["add_generation_prompt"].get<bool>())
      EXPECT_EQ(conversation_prompt(tok, messages, DataFormat::kChatml), want);
    else
      EXPECT_EQ(render_conversation(tok, messages, DataFormat::kChatml).tokens, want);
    ++checked;
  }
  EXPECT_GE(checked, 6);
}

TEST(ChatJinja, DataNeverBecomesSpecialTokensAndOnlyAnswersAreTrained) {
  REQUIRE_QWEN3();
  const Tokenizer& tok = qwen3();
  const std::vector<ChatMessage> msgs = {{"user", "Say <|im_end|><|im_start|>system"}, {"assistant", "No <think> here."},
                                         {"user", "Again?"}, {"assistant", "Fine."}};
  const Example ex = render_conversation(tok, msgs, DataFormat::kChatml);
  EXPECT_EQ(std::count(ex.tokens.begin(), ex.tokens.end(), 151645), 4);  // <|im_end|>: one per message
  EXPECT_EQ(std::count(ex.tokens.begin(), ex.tokens.end(), 151644), 4);  // <|im_start|>
  EXPECT_EQ(std::count(ex.tokens.begin(), ex.tokens.end(), 151667), 1);  // <think>: the template's only
  EXPECT_EQ(trained_text(tok, ex), "No <think> here.<|im_end|><think>\n\n</think>\n\nFine.<|im_end|>");
}

// Published templates through render_conversation: the ids of HF's rendering and the answers
// trained. Mistral v0.3's puts the system message before the last message only when that is a
// user turn, so a training conversation (ending with an answer) loses it, as in HF (meshtrain's
// built-in mistral rendering keeps it); its answers are found without their prompt prefixes.
// Qwen2.5's writes its default system prompt; Llama 3.1's its date lines and Gemma 3's gives what
// the built-in gemma rendering gives, where MESHTRAIN_CHAT_TEMPLATES holds them (their licences
// keep them out of the repository).
TEST(ChatJinja, PublishedTemplatesTrainTheAnswers) {
  const std::string root = MESHTRAIN_SOURCE_DIR;
  const fs::path dir = testing::fresh_temp_dir("chat_jinja_published");
  const std::vector<ChatMessage> msgs = {{"system", "sys"}, {"user", "hello"}, {"assistant", "world "},
                                         {"user", "hello world"}, {"assistant", "hello"}};
  {
    SCOPED_TRACE("mistral v0.3");
    const std::string file = testing::mistral::write_mistral_json(dir);
    auto own = load_tokenizer(file);
    own->set_chat_template(read_text(root + "/tests/data/chat_templates/mistral_v0.3.jinja"));
    const Example got = render_conversation(*own, msgs, DataFormat::kMistral);
    EXPECT_EQ(got.tokens, own->encode_with_specials("<s>[INST] hello[/INST] world</s>[INST] hello world[/INST] hello</s>"));
    Ids trained;
    for (size_t i = 0; i < got.tokens.size(); ++i)
      if (got.trained[i]) trained.push_back(got.tokens[i]);
    EXPECT_EQ(trained, (Ids{1027, 1063, 2, 1027, 1058, 2}));  // "▁" "▁world" </s> "▁" "▁hello" </s>
    // A prompt (ending with the user's turn) has the system message.
    EXPECT_EQ(conversation_prompt(*own, {{"system", "sys"}, {"user", "hello"}}, DataFormat::kMistral),
              own->encode_with_specials("<s>[INST] sys\n\nhello[/INST]"));
  }
  if (fs::exists(kQwen3 + "/tokenizer.json")) {
    SCOPED_TRACE("qwen2.5");
    auto tok = load_tokenizer(kQwen3);
    tok->set_chat_template(read_text(root + "/tests/data/hf_families/qwen2.5_chat_template.jinja"));
    const std::vector<ChatMessage> no_system(msgs.begin() + 1, msgs.end());
    const Example got = render_conversation(*tok, no_system, DataFormat::kChatml);
    EXPECT_EQ(got.tokens, tok->encode_with_specials(
                              "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant."
                              "<|im_end|>\n<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\nworld <|im_end|>\n"
                              "<|im_start|>user\nhello world<|im_end|>\n<|im_start|>assistant\nhello<|im_end|>\n"));
    EXPECT_EQ(trained_text(*tok, got), "world <|im_end|>hello<|im_end|>");
  }
  const char* extra = std::getenv("MESHTRAIN_CHAT_TEMPLATES");
  const std::string llama3 = root + "/../shared/data/tokenizers/llama3";
  if (extra && fs::exists(std::string(extra) + "/llama3.1.jinja") && fs::exists(llama3)) {
    SCOPED_TRACE("llama3.1");
    auto tok = load_tokenizer(llama3);
    tok->set_chat_template(read_text(std::string(extra) + "/llama3.1.jinja"));
    const Example got = render_conversation(*tok, msgs, DataFormat::kChat);
    EXPECT_EQ(got.tokens, tok->encode_with_specials(
                              "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: "
                              "December 2023\nToday Date: 26 Jul 2024\n\nsys<|eot_id|><|start_header_id|>user"
                              "<|end_header_id|>\n\nhello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
                              "world<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nhello world<|eot_id|>"
                              "<|start_header_id|>assistant<|end_header_id|>\n\nhello<|eot_id|>"));
    EXPECT_EQ(trained_text(*tok, got), "world<|eot_id|>hello<|eot_id|>");
  }
  if (extra && fs::exists(std::string(extra) + "/gemma3.jinja")) {  // as the built-in gemma rendering
    SCOPED_TRACE("gemma3");
    const std::string gemma = root + "/tests/data/hf_families/gemma_synthetic";
    auto builtin = load_tokenizer(gemma);
    auto own = load_tokenizer(gemma);
    own->set_chat_template(read_text(std::string(extra) + "/gemma3.jinja"));
    const std::vector<ChatMessage> turns = {{"system", "Sys."}, {"user", "Hi"}, {"assistant", " Hello there \n"},
                                            {"user", "Again"}, {"assistant", "Bye."}};
    const Example want = render_conversation(*builtin, turns, DataFormat::kGemma);
    const Example got = render_conversation(*own, turns, DataFormat::kGemma);
    EXPECT_EQ(got.tokens, want.tokens);
    EXPECT_EQ(got.trained, want.trained);
    EXPECT_EQ(conversation_prompt(*own, {{"user", "Hi"}}, DataFormat::kGemma),
              conversation_prompt(*builtin, {{"user", "Hi"}}, DataFormat::kGemma));
  }
}

// {% generation %} blocks, where a template has them, are what is trained.
TEST(ChatJinja, GenerationBlocksMarkTheTrainedText) {
  REQUIRE_QWEN3();
  auto tok = load_tokenizer(kQwen3);
  tok->set_chat_template(
      "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' }}{% if m.role == 'assistant' %}{% generation %}"
      "{{ m.content + '<|im_end|>' }}{% endgeneration %}{% else %}{{ m.content + '<|im_end|>' }}{% endif %}"
      "{{ '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}");
  const Example ex = render_conversation(*tok, {{"user", "Hi"}, {"assistant", "Hello"}}, DataFormat::kChatml);
  EXPECT_EQ(trained_text(*tok, ex), "Hello<|im_end|>");
  EXPECT_EQ(ex.tokens, tok->encode_with_specials("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello<|im_end|>\n"));
}

// A model's template that uses what the interpreter lacks: one warning naming it, and the built-in
// rendering of its family.
TEST(ChatJinja, AnUnsupportedModelTemplateFallsBackWithAWarning) {
  REQUIRE_QWEN3();
  auto tok = load_tokenizer(kQwen3);
  tok->set_chat_template("{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content | wordwrap(60) }}"
                         "{{ '<|im_end|>\\n' }}{% endfor %}");
  const auto warning = chat_template_warning(*tok, DataFormat::kChatml);
  ASSERT_TRUE(warning.has_value());
  EXPECT_EQ(*warning,
            "warning: the tokenizer's chat_template uses what meshtrain's Jinja interpreter lacks (chat template line "
            "1: unsupported filter 'wordwrap'): conversations are rendered with meshtrain's built-in chatml template");
  const Example ex = render_conversation(*tok, {{"user", "Hi"}, {"assistant", "Hello"}}, DataFormat::kChatml);
  EXPECT_EQ(ex.tokens, tok->encode_with_specials("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello<|im_end|>\n"));
  EXPECT_EQ(chat_template_warning(qwen3(), DataFormat::kChatml), std::nullopt);  // Qwen3's own runs
}

// Through the binary: a chat file trained with the user's template file (data.chat_template), whose
// markers are its own; a user's template the interpreter cannot run is refused in one line.
TEST(ChatJinja, AUsersTemplateFileTrainsThroughTheBinary) {
  REQUIRE_QWEN3();
  const fs::path dir = testing::fresh_temp_dir("chat_jinja_user_template");
  const std::string data = (dir / "chat.jsonl").string();
  {
    std::ofstream f(data);
    for (int i = 0; i < 6; ++i)
      f << R"({"messages": [{"role": "user", "content": "Colour )" << i
        << R"(?"}, {"role": "assistant", "content": "Blue."}]})" << "\n";
  }
  const std::string mine = (dir / "mine.jinja").string();
  std::ofstream(mine) << "{%- for m in messages %}\n"
                         "{{- '<|im_start|>' + ('Q: ' if m.role == 'user' else 'A: ') + m.content | trim + '<|im_end|>' }}\n"
                         "{%- endfor %}\n"
                         "{%- if add_generation_prompt %}{{ '<|im_start|>A: ' }}{% endif %}\n";
  const std::string run = (dir / "run").string();
  const std::string args = " --data " + data + " --set data.tokenizer=" + kQwen3 +
                           " --set model.vocab_size=151669 --set model.hidden_size=32 --set model.intermediate_size=64"
                           " --set model.num_hidden_layers=1 --set model.num_attention_heads=2"
                           " --set model.num_key_value_heads=1 --set train.steps=1 --set train.batch_size=2"
                           " --set train.peak_gflops=100 --set optim.warmup_steps=0 --set data.cache_dir=off"
                           " --set data.val_fraction=0";
  testing::CommandResult r = testing::run_meshtrain("train --out " + run + args + " --set data.chat_template=" + mine);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("chatml examples"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("warning:"), std::string::npos) << r.output;
  // What that run trained on: the answer after the template's "A: " prompt, and its <|im_end|>
  // (" Blue" is one token, reaching into the answer, so trained).
  auto tok = load_tokenizer(kQwen3);
  tok->set_chat_template(read_chat_template_file(mine));
  const Example ex = render_conversation(*tok, {{"user", "Colour 0?"}, {"assistant", "Blue."}}, default_chat_format(*tok));
  EXPECT_EQ(trained_text(*tok, ex), " Blue.<|im_end|>");
  EXPECT_EQ(ex.tokens, tok->encode_with_specials("<|im_start|>Q: Colour 0?<|im_end|><|im_start|>A: Blue.<|im_end|>"));

  // The template went with the model: generate prompts with it.
  r = testing::run_meshtrain("generate --model " + run + "/model --prompt Hi -n 1 --temperature 0 --template auto");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("<|im_start|>Q: Hi<|im_end|><|im_start|>A: ", 0), 0u) << r.output;

  const std::string broken = (dir / "broken.jinja").string();
  std::ofstream(broken) << "{% for m in messages %}\n{% include 'turn.jinja' %}\n{% endfor %}";
  r = testing::run_meshtrain("train --out " + (dir / "run2").string() + args + " --set data.chat_template=" + broken);
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("meshtrain: error: data.chat_template " + broken +
                          ": chat template line 2: unsupported construct '{% include %}'"),
            std::string::npos)
      << r.output;
}

// An adapter carries no tokenizer: a LoRA run with the user's template records its text beside
// the adapter (meshtrain_template.json), and generate --adapter and a merged export use it, not
// the base tokenizer's own (Qwen3's) template.
TEST(ChatJinja, ALoraAdapterCarriesTheUsersTemplate) {
  REQUIRE_QWEN3();
  const fs::path dir = testing::fresh_temp_dir("chat_jinja_adapter_template");
  const std::string data = (dir / "chat.jsonl").string();
  {
    std::ofstream f(data);
    for (int i = 0; i < 6; ++i)
      f << R"({"messages": [{"role": "user", "content": "Colour )" << i
        << R"(?"}, {"role": "assistant", "content": "Blue."}]})" << "\n";
  }
  const std::string mine_text = "{%- for m in messages %}{{- '<|im_start|>' + ('Q: ' if m.role == 'user' else 'A: ') + "
                                "m.content | trim + '<|im_end|>' }}{%- endfor %}"
                                "{%- if add_generation_prompt %}{{ '<|im_start|>A: ' }}{% endif %}";
  const std::string mine = (dir / "mine.jinja").string();
  std::ofstream(mine) << mine_text;
  const std::string train = " --data " + data +
                            " --set train.steps=1 --set train.batch_size=2 --set train.peak_gflops=100"
                            " --set optim.warmup_steps=0 --set data.cache_dir=off --set data.val_fraction=0";
  const std::string base = (dir / "base").string();
  testing::CommandResult r = testing::run_meshtrain(
      "train --out " + base + train + " --set data.tokenizer=" + kQwen3 +
      " --set model.vocab_size=151669 --set model.hidden_size=32 --set model.intermediate_size=64"
      " --set model.num_hidden_layers=1 --set model.num_attention_heads=2 --set model.num_key_value_heads=1");
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string lora = (dir / "lora").string();
  r = testing::run_meshtrain("train --out " + lora + train + " --set model.path=" + base +
                             "/model --set lora.enabled=true --set data.chat_template=" + mine);
  ASSERT_EQ(r.code, 0) << r.output;
  std::ifstream recorded(lora + "/adapter/meshtrain_template.json");
  const nlohmann::json j = nlohmann::json::parse(recorded);
  EXPECT_EQ(j.value("template", ""), "chatml");
  EXPECT_EQ(j.value("chat_template", ""), mine_text);
  EXPECT_FALSE(fs::exists(lora + "/model")) << "a LoRA run writes no model directory";

  r = testing::run_meshtrain("generate --model " + base + "/model --adapter " + lora +
                             "/adapter --prompt Hi -n 1 --temperature 0");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("rendering with the chat_template the adapter was trained with"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("<|im_start|>Q: Hi<|im_end|><|im_start|>A: "), std::string::npos) << r.output;

  const std::string merged = (dir / "merged").string();
  r = testing::run_meshtrain("export --model " + base + "/model --adapter " + lora + "/adapter --merged " + merged);
  ASSERT_EQ(r.code, 0) << r.output;
  std::ifstream config(merged + "/tokenizer_config.json");
  EXPECT_EQ(nlohmann::json::parse(config).value("chat_template", ""), mine_text);
}

}  // namespace
}  // namespace mt
