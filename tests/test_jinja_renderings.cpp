// meshtrain's Jinja interpreter writes, byte for byte, what Hugging Face's does
// (@huggingface/jinja, via scripts/render_chat_templates.mjs --corpus) for each published chat
// template over the corpus of scripts/chat_template_corpus.mjs: system prompts, multi-turn, empty
// content, unicode, tools and tool calls, Qwen3's reasoning. Templates whose licence keeps them out
// of the project (Llama 3.1/3.2, Gemma 3) are checked when MESHTRAIN_CHAT_TEMPLATES names a
// directory holding them (scripts/check_chat_templates.sh); otherwise their cases are skipped.
// Where Python's jinja2 as transformers runs it renders differently (python_rendered, from
// scripts/render_chat_templates_py.py: @huggingface/jinja's str.lstrip(chars) ignores its chars),
// meshtrain writes Python's text, which is what the models were trained on.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "data/jinja/template.h"

namespace mt::jinja {
namespace {

namespace fs = std::filesystem;
const std::string kRoot = MESHTRAIN_SOURCE_DIR;

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const nlohmann::ordered_json& corpus() {
  static const nlohmann::ordered_json doc =
      nlohmann::ordered_json::parse(read_text(kRoot + "/tests/data/chat_templates/renderings.json"));
  return doc;
}

// The template's text, or "" when it is not available here.
std::string template_text(const std::string& name, const nlohmann::ordered_json& t) {
  if (t.contains("file")) return read_text(kRoot + "/" + t["file"].get<std::string>());
  if (t.contains("tokenizer_config")) {
    const std::string path = kRoot + "/" + t["tokenizer_config"].get<std::string>();
    if (!fs::exists(path)) return "";
    return nlohmann::json::parse(read_text(path))["chat_template"].get<std::string>();
  }
  const char* dir = std::getenv("MESHTRAIN_CHAT_TEMPLATES");
  if (!dir || !fs::exists(std::string(dir) + "/" + name + ".jinja")) return "";
  return read_text(std::string(dir) + "/" + name + ".jinja");
}

// The context a case renders with: its variables, messages[i]'s values carrying origin i.
Dict context_of(const nlohmann::ordered_json& c) {
  Dict ctx;
  for (const auto& [k, v] : c["context"].items()) {
    if (k == "messages") {
      List messages;
      for (size_t i = 0; i < v.size(); ++i) messages.push_back(from_json(v[i], static_cast<int32_t>(i)));
      ctx.set(k, Value::make_list(std::move(messages)));
    } else if (k == "bos_token" || k == "eos_token") {
      ctx.set(k, Value::string(v.get<std::string>(), kLiteral));
    } else {
      ctx.set(k, from_json(v, kData));
    }
  }
  ctx.set("strftime_now", strftime_now_at(corpus()["strftime_now_epoch"].get<std::time_t>()));
  return ctx;
}

class JinjaRenderings : public ::testing::TestWithParam<std::string> {};

TEST_P(JinjaRenderings, EqualHuggingFaces) {
  const std::string name = GetParam();
  const std::string text = template_text(name, corpus()["templates"][name]);
  if (text.empty()) GTEST_SKIP() << name << ": template not available here (see renderings.json's note)";
  const Template tmpl(text);
  int cases = 0;
  for (const auto& c : corpus()["cases"]) {
    if (c["template"] != name) continue;
    ++cases;
    SCOPED_TRACE(name + ": " + c["name"].get<std::string>());
    if (c.contains("error") || c.contains("python_error")) {
      EXPECT_THROW(tmpl.render(context_of(c)), Error) << "HF's renderer refused it: " << c["error"];
      continue;
    }
    try {
      const auto& want = c.contains("python_rendered") ? c["python_rendered"] : c["rendered"];
      EXPECT_EQ(tmpl.render(context_of(c)).text.s, want.get<std::string>());
    } catch (const Error& e) {
      ADD_FAILURE() << e.what();
    }
  }
  EXPECT_GE(cases, 7);
}

INSTANTIATE_TEST_SUITE_P(Published, JinjaRenderings,
                         ::testing::Values("qwen3", "qwen2.5", "mistral_v0.3", "llama3.1", "llama3.2", "gemma3"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace mt::jinja
