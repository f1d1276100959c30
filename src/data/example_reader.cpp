// Alpaca / chat files -> Examples (declared in examples.h). Broken JSON is an error (the file is
// damaged as a whole); a bad record is a counted skip (real datasets have a few).
#include <algorithm>
#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/chat_templates.h"
#include "data/examples.h"
#include "data/json_records.h"

namespace mt {
namespace {

using nlohmann::json;

using Record = JsonRecord;

// The format of a file from its first record (every record is an object).
DataFormat detect_format(const std::string& path, const Record& first) {
  if (first.value.contains("messages")) return DataFormat::kChat;
  if (first.value.contains("instruction")) return DataFormat::kAlpaca;
  fail("data file '" + path + "': cannot tell the format: " + first.where +
       " has neither \"messages\" (chat) nor \"instruction\" (alpaca); set the format");
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

// The examples of `input`, rendered record by record as the file is read: memory holds the
// examples kept, not the file.
ExampleSet read_example_records(const DataInput& input, const Tokenizer& tok, const ExampleOptions& opt) {
  const std::string& path = input.path;
  if (opt.max_tokens < 0) fail("data file '" + path + "': max_tokens must be >= 0");
  ExampleSet set;
  set.format = opt.format;
  std::string first_skip;
  int64_t longest = 0;  // of the records skipped for length: the sequence length keeping them all
  const bool any = for_each_json_record(input, [&](const Record& r) {
    if (set.format == DataFormat::kAuto) {
      set.format = detect_format(path, r);
      if (set.format == DataFormat::kChat) set.format = default_chat_format(tok);
    }
    ++set.records;
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
      return true;
    }
    set.examples.push_back(std::move(ex));
    return true;
  });
  if (!any) fail("data file '" + path + "' is empty");
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

}  // namespace

ExampleSet read_examples(const std::string& path, const Tokenizer& tok, const ExampleOptions& opt) {
  return read_example_records(DataInput{path, std::nullopt}, tok, opt);
}

ExampleSet parse_examples(const std::string& text, const std::string& path, const Tokenizer& tok,
                          const ExampleOptions& opt) {
  return read_example_records(DataInput{path, text}, tok, opt);
}

DataFormat example_file_format(const std::string& path, const Tokenizer* tok) {
  std::optional<DataFormat> format;
  const bool any = for_each_json_record(DataInput{path, std::nullopt}, [&](const Record& r) {
    format = detect_format(path, r);
    return false;
  });
  if (!any) fail("data file '" + path + "' is empty");
  if (!format) fail("data file '" + path + "': no usable records");
  return *format == DataFormat::kChat && tok ? default_chat_format(*tok) : *format;
}

}  // namespace mt
