// Alpaca / chat files -> Examples (declared in examples.h). Broken JSON is an error (the file is
// damaged as a whole); a bad record is a counted skip (real datasets have a few).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/bounded_json.h"
#include "core/error.h"
#include "core/regular_file.h"
#include "data/chat_templates.h"
#include "data/examples.h"

namespace mt {
namespace {

using nlohmann::json;

struct Record {
  json value;
  std::string where;  // "line 7" (JSONL) or "record 7" (array), 1-based
};

std::string read_whole(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail("data file '" + path + "' does not exist");
  if (std::filesystem::is_directory(path, ec))
    fail("data file '" + path + "' is a directory, expected a .json or .jsonl file");
  require_regular_file(path, "data file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open data file '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail("cannot read data file '" + path + "'");
  return ss.str();
}

bool is_json_lines(const std::string& path, const std::string& text) {
  if (std::filesystem::path(path).extension() == ".jsonl") return true;
  // A .json file is an array of records unless it starts with an object: many tools write
  // JSON Lines under a .json name.
  return text[text.find_first_not_of(" \t\r\n")] != '[';
}

// Each record is parsed on its own (core/bounded_json: a size and a nesting limit per record), so
// a huge or deeply nested file is refused at its first bad record, in time and memory linear in
// the file, instead of being handed to the parser whole.
std::vector<Record> parse_records(const std::string& path, const std::string& text) {
  std::vector<Record> out;
  const std::string file = "data file '" + path + "'";
  if (is_json_lines(path, text)) {
    std::string_view rest = text;
    for (int64_t no = 1; !rest.empty(); ++no) {
      const size_t end = rest.find('\n');
      const std::string_view line = rest.substr(0, end);
      rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
      if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
      const std::string where = "line " + std::to_string(no);
      out.push_back({parse_json(line, JsonKind::data_record, file + ": " + where), where});
    }
    return out;
  }
  for_each_json_array_element(text, JsonKind::data_record, file,
                              [&](std::string_view element, size_t index, size_t offset) {
                                const std::string where = "record " + std::to_string(index + 1);
                                out.push_back({parse_json(element, JsonKind::data_record,
                                                          file + ": malformed JSON at byte offset " +
                                                              std::to_string(offset) + ": " + where),
                                               where});
                              });
  return out;
}

DataFormat detect_format(const std::string& path, const std::vector<Record>& records) {
  for (const Record& r : records) {
    if (!r.value.is_object()) continue;
    if (r.value.contains("messages")) return DataFormat::kChat;
    if (r.value.contains("instruction")) return DataFormat::kAlpaca;
    fail("data file '" + path + "': cannot tell the format: " + r.where +
         " has neither \"messages\" (chat) nor \"instruction\" (alpaca); set the format");
  }
  fail("data file '" + path + "': no record is a JSON object");
}

// A string field, or the reason the record is unusable. Optional fields may be absent or null.
std::optional<std::string> string_field(const json& obj, const char* name, bool required,
                                        std::string& value) {
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) {
    if (required) return "\"" + std::string(name) + "\" is missing";
    value.clear();
    return std::nullopt;
  }
  if (!it->is_string()) return "\"" + std::string(name) + "\" is not a string";
  value = it->get<std::string>();
  return std::nullopt;
}

// Renders one record into `ex`; returns the reason when the record must be skipped.
std::optional<std::string> render_record(const json& rec, DataFormat format, const Tokenizer& tok,
                                         Example& ex) {
  if (!rec.is_object()) return std::string("not a JSON object");
  if (format == DataFormat::kAlpaca) {
    std::string instruction, input, output;
    if (auto e = string_field(rec, "instruction", true, instruction)) return e;
    if (auto e = string_field(rec, "input", false, input)) return e;
    if (auto e = string_field(rec, "output", true, output)) return e;
    ex = render_alpaca(tok, instruction, input, output);
    return std::nullopt;
  }
  auto it = rec.find("messages");
  if (it == rec.end()) return std::string("\"messages\" is missing");
  if (!it->is_array() || it->empty()) return std::string("\"messages\" is not a non-empty array");
  std::vector<ChatMessage> messages;
  for (const json& m : *it) {
    if (!m.is_object()) return std::string("a message is not a JSON object");
    ChatMessage cm;
    if (auto e = string_field(m, "role", true, cm.role)) return "message " + *e;
    if (cm.role != "system" && cm.role != "user" && cm.role != "assistant")
      return "unknown role \"" + cm.role + "\" (expected system, user or assistant)";
    if (auto e = string_field(m, "content", true, cm.content)) return "message " + *e;
    messages.push_back(std::move(cm));
  }
  if (auto why = chat_roles_problem(messages, format)) return why;
  ex = render_conversation(tok, messages, format);
  return std::nullopt;
}

// True when some token after the first is trained, i.e. the example contributes to the loss.
bool has_prediction(const Example& ex) {
  for (size_t i = 1; i < ex.trained.size(); ++i)
    if (ex.trained[i]) return true;
  return false;
}

}  // namespace

ExampleSet read_examples(const std::string& path, const Tokenizer& tok, const ExampleOptions& opt) {
  return parse_examples(read_whole(path), path, tok, opt);
}

DataFormat example_file_format(const std::string& path, const Tokenizer* tok) {
  const std::string text = read_whole(path);
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) fail("data file '" + path + "' is empty");
  const DataFormat f = detect_format(path, parse_records(path, text));
  return f == DataFormat::kChat && tok ? default_chat_format(*tok) : f;
}

ExampleSet parse_examples(const std::string& text, const std::string& path, const Tokenizer& tok,
                          const ExampleOptions& opt) {
  if (opt.max_tokens < 0) fail("data file '" + path + "': max_tokens must be >= 0");
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) fail("data file '" + path + "' is empty");
  const std::vector<Record> records = parse_records(path, text);
  ExampleSet set;
  set.format = opt.format;
  if (set.format == DataFormat::kAuto) {
    set.format = detect_format(path, records);
    if (set.format == DataFormat::kChat) set.format = default_chat_format(tok);
  }
  set.records = int64_t(records.size());
  std::string first_skip;
  int64_t longest = 0;  // of the records skipped for length: the sequence length keeping them all
  for (const Record& r : records) {
    Example ex;
    std::optional<std::string> why;
    try {
      why = render_record(r.value, set.format, tok, ex);
    } catch (const Error& e) {  // a setup problem (tokenizer without chat specials), not the record's
      fail("data file '" + path + "': " + e.what());
    }
    if (!why && opt.max_tokens > 0 && int64_t(ex.tokens.size()) > opt.max_tokens) {
      if (opt.truncate) {
        ex.tokens.resize(size_t(opt.max_tokens));
        ex.trained.resize(size_t(opt.max_tokens));
      } else {
        why = std::to_string(ex.tokens.size()) + " tokens, longer than the sequence length " +
              std::to_string(opt.max_tokens);
        ++set.too_long;
        longest = std::max(longest, int64_t(ex.tokens.size()));
      }
    }
    if (!why && !has_prediction(ex)) why = "no response tokens to train on";
    if (why) {
      if (set.skipped++ == 0) first_skip = r.where + ": " + *why;
      continue;
    }
    set.examples.push_back(std::move(ex));
  }
  if (set.skipped > 0) {
    set.warning = "warning: data file '" + path + "': " + std::to_string(set.skipped) + " of " +
                  std::to_string(set.records) + " records skipped (";
    if (set.too_long > 0) {
      set.warning += std::to_string(set.too_long) + " longer than the sequence length " +
                     std::to_string(opt.max_tokens) + ": ";
      if (opt.model_limit <= 0 || longest <= opt.model_limit)
        set.warning += "a sequence length of " + std::to_string(longest) + " keeps them, or truncate them; ";
      else if (opt.max_tokens < opt.model_limit)
        set.warning += "the longest is " + std::to_string(longest) + " tokens, more than the model's limit of " +
                       std::to_string(opt.model_limit) + ": a sequence length of " +
                       std::to_string(opt.model_limit) + " keeps some, or truncate them; ";
      else
        set.warning += "the longest is " + std::to_string(longest) + " tokens, more than the model's limit of " +
                       std::to_string(opt.model_limit) + ": truncate them; ";
    }
    set.warning += "first: " + first_skip + ")";
  }
  if (set.examples.empty())
    fail("data file '" + path + "': no usable records" +
         (set.skipped > 0 ? " (" + std::to_string(set.skipped) + " skipped; first: " + first_skip + ")"
                          : std::string()));
  if (!set.warning.empty() && !opt.quiet) std::cerr << set.warning << "\n";
  return set;
}

}  // namespace mt
