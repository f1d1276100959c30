#include "data/chat_jinja.h"

#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "core/atomic_file.h"
#include "core/bounded_json.h"
#include "core/error.h"
#include "core/regular_file.h"
#include "data/chat_rendering.h"
#include "data/jinja/template.h"

namespace mt {
namespace {

// The text of the tokenizer's special token `id`, or "".
std::string special_text(const Tokenizer& tok, int32_t id) {
  if (id < 0) return "";
  for (const Tokenizer::Special& s : tok.special_tokens())
    if (s.id == id) return s.text;
  return "";
}

// Message i as the template sees it: the record's object, every value carrying origin i (so its
// bytes are found as the message's and never become special tokens), or {role, content}.
jinja::Value message_value(const ChatMessage& m, size_t i) {
  const int32_t origin = static_cast<int32_t>(i);
  if (!m.json.empty())
    return jinja::from_json(parse_ordered_json(m.json, JsonKind::data_record, "message " + std::to_string(i + 1)),
                            origin);
  jinja::Dict d;
  d.set("role", jinja::Value::string(m.role, origin));
  d.set("content", jinja::Value::string(m.content, origin));
  jinja::Value v = jinja::Value::make_dict(std::move(d));
  v.origin = origin;
  return v;
}

jinja::Rendered run(const Tokenizer& tok, const jinja::Template& tmpl, const std::vector<ChatMessage>& messages,
                    size_t count, bool add_generation_prompt, const std::string& tools) {
  jinja::Dict ctx;
  jinja::List list;
  for (size_t i = 0; i < count; ++i) list.push_back(message_value(messages[i], i));
  ctx.set("messages", jinja::Value::make_list(std::move(list)));
  // transformers passes tools=None when there are none: the variable is then undefined or none,
  // which templates test with `if tools`.
  if (!tools.empty()) ctx.set("tools", jinja::from_json(parse_ordered_json(tools, JsonKind::data_record, "tools"),
                                                        jinja::kData));
  ctx.set("add_generation_prompt", jinja::Value::boolean(add_generation_prompt));
  // tokenizer_config.json's strings, as transformers passes its special tokens; the ids' text for a
  // tokenizer whose config names none.
  const std::string& bos = tok.config_bos_token();
  const std::string& eos = tok.config_eos_token();
  ctx.set("bos_token", jinja::Value::string(bos.empty() ? special_text(tok, tok.bos_id()) : bos, jinja::kLiteral));
  ctx.set("eos_token", jinja::Value::string(eos.empty() ? special_text(tok, tok.eos_id()) : eos, jinja::kLiteral));
  ctx.set("strftime_now", jinja::strftime_now_at(std::time(nullptr)));
  return tmpl.render(ctx);
}

// The special token whose text starts at `at` with every byte written by the template, longest
// first; nullptr for none.
const Tokenizer::Special* special_at(const Tokenizer& tok, const jinja::Text& t, size_t at) {
  if (t.from[at] != jinja::kLiteral) return nullptr;
  for (const Tokenizer::Special& s : tok.special_tokens()) {  // longest text first
    if (s.text.empty() || t.s.compare(at, s.text.size(), s.text) != 0) continue;
    bool literal = true;
    for (size_t k = at; k < at + s.text.size() && literal; ++k) literal = t.from[k] == jinja::kLiteral;
    if (literal) return &s;
  }
  return nullptr;
}

bool ends_turn(const Tokenizer& tok, const Tokenizer::Special& s) {
  static const char* const kEnds[] = {"<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<end_of_turn>", "</s>", "<|end|>",
                                      "<|endoftext|>"};
  if (s.id == tok.eos_id()) return true;
  for (const char* e : kEnds)
    if (s.text == e) return true;
  return false;
}

// Which bytes of the rendering are trained (see chat_jinja.h).
std::vector<uint8_t> trained_bytes(const Tokenizer& tok, const jinja::Template& tmpl,
                                   const std::vector<ChatMessage>& messages, const std::string& tools,
                                   const jinja::Rendered& r) {
  const jinja::Text& t = r.text;
  std::vector<uint8_t> trained(t.s.size(), 0);
  if (tmpl.has_generation()) {
    for (const auto& [b, e] : r.generation) std::fill(trained.begin() + b, trained.begin() + e, 1);
    return trained;
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].role != "assistant") continue;
    const int32_t me = static_cast<int32_t>(i);
    size_t first = t.s.size(), last = 0;
    for (size_t k = 0; k < t.s.size(); ++k)
      if (t.from[k] == me) {
        first = std::min(first, k);
        last = k + 1;
      }
    // Where the answer starts: after the prompt the template writes for it.
    const std::string prompt = run(tok, tmpl, messages, i, true, tools).text.s;
    size_t begin;
    if (t.s.compare(0, prompt.size(), prompt) == 0) {
      begin = prompt.size();
    } else if (first < t.s.size()) {
      // The messages before it render differently alone (Mistral puts the system message before
      // the last user turn): from the message's text, with the blanks the template writes just
      // before it (Mistral's " " before an answer, which its first token holds).
      begin = first;
      while (begin > 0 && t.from[begin - 1] == jinja::kLiteral && (t.s[begin - 1] == ' ' || t.s[begin - 1] == '\n'))
        --begin;
    } else {
      continue;  // the template wrote nothing of this message
    }
    size_t end = std::max(begin, last);
    // On to the end of the turn, through the template's own text only.
    for (size_t k = end; k < t.s.size(); ++k) {
      if (t.from[k] >= 0) break;  // another message
      if (const Tokenizer::Special* s = special_at(tok, t, k); s && ends_turn(tok, *s)) {
        end = k + s->text.size();
        break;
      }
    }
    std::fill(trained.begin() + begin, trained.begin() + end, 1);
  }
  return trained;
}

}  // namespace

std::string read_chat_template_file(const std::string& path) {
  require_regular_file(path, "chat template");
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0) {
    const nlohmann::json config = read_json_file(path, JsonKind::tokenizer);
    if (!config.is_object() || !config.contains("chat_template") || !config["chat_template"].is_string())
      fail(path + ": no \"chat_template\" string in this JSON file");
    return config["chat_template"].get<std::string>();
  }
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot open the chat template file " + path);
  std::stringstream text;
  text << f.rdbuf();
  if (!f.good() && !f.eof()) fail(path + ": cannot read the chat template");
  return text.str();
}

std::string write_chat_template_beside(const std::string& dir, const std::string& jinja) {
  const std::string path = dir + "/tokenizer_config.json";
  nlohmann::ordered_json config = nlohmann::ordered_json::object();
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec))
    config = parse_ordered_json(read_json_text(path, JsonKind::tokenizer), JsonKind::tokenizer, path);
  if (!config.is_object()) fail(path + ": not a JSON object");
  config["chat_template"] = jinja;
  write_file_atomically(path, [&](std::ostream& out) { out << config.dump(2) << "\n"; });
  return path;
}

std::shared_ptr<const jinja::Template> parsed_chat_template(const Tokenizer& tok, std::string* unsupported) {
  const std::string& source = tok.chat_template();
  if (source.empty()) return nullptr;
  struct Parsed {
    std::shared_ptr<const jinja::Template> tmpl;
    std::string error;
  };
  static std::mutex mu;
  static std::map<std::string, Parsed> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(source);
  if (it == cache.end()) {
    Parsed p;
    try {
      p.tmpl = std::make_shared<const jinja::Template>(source);
    } catch (const Error& e) {
      p.error = e.what();
    }
    it = cache.emplace(source, std::move(p)).first;
  }
  if (unsupported) *unsupported = it->second.error;
  return it->second.tmpl;
}

Example render_with_template(const Tokenizer& tok, const jinja::Template& tmpl, const std::vector<ChatMessage>& messages,
                             bool add_generation_prompt, const std::string& tools) {
  const jinja::Rendered r = run(tok, tmpl, messages, messages.size(), add_generation_prompt, tools);
  const jinja::Text& t = r.text;
  const std::vector<uint8_t> trained = add_generation_prompt ? std::vector<uint8_t>(t.s.size(), 0)
                                                             : trained_bytes(tok, tmpl, messages, tools, r);
  std::vector<ChatPart> parts;
  for (size_t k = 0; k < t.s.size();) {
    if (const Tokenizer::Special* s = special_at(tok, t, k)) {
      parts.push_back({s->id, "", trained[k] != 0});
      k += s->text.size();
      continue;
    }
    const bool tr = trained[k] != 0;
    if (parts.empty() || parts.back().special >= 0 || parts.back().trained != tr) parts.push_back({-1, "", tr});
    parts.back().text += t.s[k];
    ++k;
  }
  return encode_chat_parts(tok, parts);
}

std::string chat_template_day(const std::string& jinja, long long now) {
  if (jinja.find("strftime_now") == std::string::npos) return "";
  const std::time_t t = static_cast<std::time_t>(now);
  std::tm tm{};
  gmtime_r(&t, &tm);  // the clock strftime_now_at formats
  char day[32];
  return std::string(day, std::strftime(day, sizeof day, "%Y-%m-%d", &tm));
}

}  // namespace mt
