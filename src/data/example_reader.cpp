// Files of records (Alpaca, chat and ShareGPT, completion, text) -> Examples (declared in
// examples.h). Broken JSON is an error (the file is damaged as a whole); a bad record is a
// counted skip (real datasets have a few).
#include <algorithm>
#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/bounded_json.h"
#include "core/error.h"
#include "data/chat_templates.h"
#include "data/examples.h"
#include "data/json_records.h"

namespace mt {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

using Record = JsonRecord;

// What data.format = "auto" reads, for the refusal of a record that fits none of it.
constexpr const char* kFormatsRead =
    "alpaca {\"instruction\", \"input\" (optional), \"output\"}; chat {\"messages\": [{\"role\", "
    "\"content\"}]} or ShareGPT {\"conversations\": [{\"from\", \"value\"}]}, with the tokenizer's chat "
    "template or the one named (chat, chatml, gemma, mistral); completion {\"prompt\", \"completion\"} or "
    "{\"input\", \"output\"}; text_records {\"text\"}";

// The first few field names of a record (in nlohmann::json's sorted order), for messages:
// "\"answer\", \"question\"".
std::string field_names(const json& rec) {
  std::string names;
  int shown = 0;
  for (auto it = rec.begin(); it != rec.end(); ++it) {
    if (shown++ == 6) return names + ", ...";
    names += (names.empty() ? "\"" : ", \"") + it.key() + "\"";
  }
  return names.empty() ? "no fields" : names;
}

// The format of a file from its first record (every record is an object).
DataFormat detect_format(const std::string& path, const Record& first) {
  const json& v = first.value;
  if (v.contains("messages") || v.contains("conversations")) return DataFormat::kChat;
  if (v.contains("instruction")) return DataFormat::kAlpaca;
  if ((v.contains("prompt") && v.contains("completion")) || (v.contains("input") && v.contains("output")))
    return DataFormat::kCompletion;
  if (v.contains("text")) return DataFormat::kTextRecords;
  fail("data file '" + path + "': cannot tell the format: " + first.where + " has " + field_names(v) +
       ", which fit no format: " + kFormatsRead +
       "; set data.format to one of them, or map the file's fields with data.columns (e.g. \"prompt=question\")");
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

// The chat role of a ShareGPT "from": its own names (human, gpt, and LLaMA-Factory's observation
// for a tool's result) or the chat ones; function_call is handled by sharegpt_tool_call.
std::optional<std::string> sharegpt_role(std::string& role) {
  if (role == "human") role = "user";
  else if (role == "gpt") role = "assistant";
  else if (role == "observation") role = "tool";
  if (role == "system" || role == "user" || role == "assistant" || role == "tool") return std::nullopt;
  return "unknown ShareGPT \"from\" \"" + role +
         "\" (expected system, human, gpt, user, assistant, function_call, observation or tool)";
}

// JSON text parsed with its keys in order (a tools list or a function call given as a string),
// or nullopt when it is not JSON.
std::optional<ordered_json> parse_embedded(const std::string& text) {
  try {
    return parse_ordered_json(text, JsonKind::data_record, "");
  } catch (const Error&) {
    return std::nullopt;
  }
}

// LLaMA-Factory's ShareGPT {"from": "function_call", "value": "{\"name\": ..., \"arguments\": ...}"}
// (or a list of such calls) as the assistant message of the messages format that makes it.
std::optional<std::string> sharegpt_tool_call(const std::string& value, ordered_json& message) {
  std::optional<ordered_json> calls = parse_embedded(value);
  if (calls && calls->is_object()) calls = ordered_json::array({*calls});
  const char* bad = "a function_call turn's value is not JSON {\"name\", \"arguments\"} (or a list of them)";
  if (!calls || !calls->is_array() || calls->empty()) return std::string(bad);
  ordered_json tool_calls = ordered_json::array();
  for (const ordered_json& c : *calls) {
    if (!c.is_object() || !c.contains("name") || !c["name"].is_string()) return std::string(bad);
    ordered_json function = {{"name", c["name"]}};
    if (c.contains("arguments")) function["arguments"] = c["arguments"];
    tool_calls.push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  message = {{"role", "assistant"}, {"content", ""}, {"tool_calls", std::move(tool_calls)}};
  return std::nullopt;
}

// A message that is no more than a string role and a string content (the fast path: no re-parse
// in the file's key order, no JSON object for the template).
bool plain_message(const json& m, const char* role_field, const char* text_field) {
  for (auto it = m.begin(); it != m.end(); ++it)
    if (it.key() != role_field && it.key() != text_field) return false;
  const auto c = m.find(text_field);
  return c != m.end() && c->is_string();
}

// Why a messages-format message's tool fields cannot be what chat templates read, or nullopt:
// tool_calls a list of {"function": {"name", "arguments" (an object or a JSON string)}}.
std::optional<std::string> tool_calls_problem(const json& m) {
  const auto it = m.find("tool_calls");
  if (it == m.end() || it->is_null()) return std::nullopt;
  if (!it->is_array()) return std::string("\"tool_calls\" is not a list");
  for (const json& c : *it) {
    const auto f = c.is_object() ? c.find("function") : c.end();
    if (!c.is_object() || f == c.end() || !f->is_object() || !f->contains("name") || !(*f)["name"].is_string())
      return std::string("a tool call is not {\"type\": \"function\", \"function\": {\"name\", \"arguments\"}}");
    const auto a = f->find("arguments");
    if (a != f->end() && !a->is_object() && !a->is_string())
      return std::string("a tool call's \"arguments\" is neither an object nor a JSON string");
  }
  return std::nullopt;
}

// The record's key that holds `field` after data.columns: the column mapped to it, or itself.
std::string source_key(const std::string& field, const std::vector<std::pair<std::string, std::string>>& pairs) {
  for (const auto& [f, column] : pairs)
    if (f == field) return column;
  return field;
}

// The turns of a chat record: {"messages": [{"role", "content", ...}]}, or ShareGPT's
// {"conversations": [{"from", "value"}]} read into the same messages, so that both shapes of a
// conversation render to the same tokens; and the record's "tools" (a list, or LLaMA-Factory's
// JSON string of one) as JSON text, "" for none. A message with more than a string role and
// content keeps its whole object (ChatMessage::json), its keys in the file's order (read again
// from the record's text: nlohmann::json sorts keys, and templates' tojson writes them in order).
std::optional<std::string> conversation_of(const Record& r, const std::vector<std::pair<std::string, std::string>>& pairs,
                                           std::vector<ChatMessage>& messages, std::string& tools) {
  const json& rec = r.value;
  const bool sharegpt = !rec.contains("messages") && rec.contains("conversations");
  const std::string list = sharegpt ? "conversations" : "messages";
  const char* role_field = sharegpt ? "from" : "role";
  const char* text_field = sharegpt ? "value" : "content";
  auto it = rec.find(list);
  if (it == rec.end()) return "\"" + list + "\" is missing";
  if (!it->is_array() || it->empty()) return "\"" + list + "\" is not a non-empty array";
  // The record in the file's key order, parsed only when a message or the tools need it.
  std::optional<ordered_json> ordered;
  auto in_order = [&]() -> const ordered_json& {
    if (!ordered) ordered = parse_ordered_json(r.text, JsonKind::data_record, r.where);
    return *ordered;
  };
  tools.clear();
  if (const auto t = rec.find("tools"); t != rec.end() && !t->is_null()) {
    std::optional<ordered_json> list_of_tools;
    if (t->is_string()) list_of_tools = parse_embedded(t->get<std::string>());
    else if (t->is_array()) list_of_tools = in_order()["tools"];
    if (!list_of_tools || !list_of_tools->is_array())
      return std::string("\"tools\" is not a list of tools (or a JSON string of one)");
    if (!list_of_tools->empty()) tools = list_of_tools->dump();
  }
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    if (!m.is_object()) return std::string("a message is not a JSON object");
    ChatMessage cm;
    if (auto e = string_field(m, role_field, true, cm.role)) return "message " + *e;
    if (sharegpt) {
      const std::string from = cm.role;
      if (from == "function_call") {
        if (auto e = string_field(m, text_field, true, cm.content)) return "message " + *e;
        ordered_json call;
        if (auto e = sharegpt_tool_call(cm.content, call)) return e;
        cm.role = "assistant";
        cm.content.clear();
        cm.json = call.dump();
        messages.push_back(std::move(cm));
        continue;
      }
      if (auto e = sharegpt_role(cm.role)) return e;
      if (auto e = string_field(m, text_field, true, cm.content)) return "message " + *e;
      messages.push_back(std::move(cm));
      continue;
    }
    if (cm.role != "system" && cm.role != "user" && cm.role != "assistant" && cm.role != "tool")
      return "unknown role \"" + cm.role + "\" (expected system, user, assistant or tool)";
    if (plain_message(m, role_field, text_field)) {
      cm.content = m[text_field].get<std::string>();
      messages.push_back(std::move(cm));
      continue;
    }
    // Content may be null or absent where the message carries tool calls (OpenAI's shape).
    const bool calls = m.contains("tool_calls") && !m["tool_calls"].is_null();
    const auto c = m.find(text_field);
    if (c == m.end() || c->is_null()) {
      if (!calls) return "message \"" + std::string(text_field) + "\" is missing";
    } else if (!c->is_string()) {
      return "message \"" + std::string(text_field) + "\" is not a string";
    } else {
      cm.content = c->get<std::string>();
    }
    if (auto e = tool_calls_problem(m)) return "message " + std::to_string(i + 1) + ": " + *e;
    if (const auto rc = m.find("reasoning_content"); rc != m.end() && !rc->is_null() && !rc->is_string())
      return "message " + std::to_string(i + 1) + ": \"reasoning_content\" is not a string";
    cm.json = in_order()[source_key(list, pairs)][i].dump();
    messages.push_back(std::move(cm));
  }
  return std::nullopt;
}

// Renders one record into `ex`; returns the reason when the record must be skipped.
std::optional<std::string> render_record(const Record& r, const std::vector<std::pair<std::string, std::string>>& pairs,
                                         DataFormat format, const Tokenizer& tok, Example& ex) {
  const json& rec = r.value;
  if (format == DataFormat::kAlpaca) {
    std::string instruction, input, output;
    if (auto e = string_field(rec, "instruction", true, instruction)) return e;
    if (auto e = string_field(rec, "input", false, input)) return e;
    if (auto e = string_field(rec, "output", true, output)) return e;
    ex = render_alpaca(tok, instruction, input, output);
    return std::nullopt;
  }
  if (format == DataFormat::kCompletion) {
    // TRL's names, else the input / output pair of many instruction sets without an instruction.
    const bool trl = rec.contains("prompt") || rec.contains("completion");
    std::string prompt, completion;
    if (auto e = string_field(rec, trl ? "prompt" : "input", true, prompt)) return e;
    if (auto e = string_field(rec, trl ? "completion" : "output", true, completion)) return e;
    ex = render_completion(tok, prompt, completion);
    return std::nullopt;
  }
  if (format == DataFormat::kTextRecords) {
    std::string text;
    if (auto e = string_field(rec, "text", true, text)) return e;
    ex = render_document(tok, text);
    return std::nullopt;
  }
  std::vector<ChatMessage> messages;
  std::string tools;
  if (auto why = conversation_of(r, pairs, messages, tools)) return why;
  if (auto why = chat_roles_problem(messages, format)) return why;
  ex = render_conversation(tok, messages, format, tools);
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
  const auto columns = column_pairs(opt.columns);
  const bool any = for_each_json_record(input, [&](Record r) {
    rename_columns(r.value, columns);
    if (set.format == DataFormat::kAuto) {
      set.format = detect_format(path, r);
      if (set.format == DataFormat::kChat) set.format = default_chat_format(tok);
    }
    ++set.records;
    Example ex;
    std::optional<std::string> why;
    try {
      why = render_record(r, columns, set.format, tok, ex);
    } catch (const Error& e) {  // a setup problem (tokenizer without chat specials), not the record's
      fail("data file '" + path + "': " + e.what());
    }
    // Documents are cut into windows once joined, however long; an example must fit a row.
    const bool fits_any_length = set.format == DataFormat::kTextRecords;
    if (!why && !fits_any_length && opt.max_tokens > 0 && int64_t(ex.tokens.size()) > opt.max_tokens) {
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

void check_columns(const std::vector<std::string>& columns) {
  std::vector<std::string> fields, sources;
  for (const std::string& c : columns) {
    const size_t eq = c.find('=');
    const std::string field = c.substr(0, eq), column = eq == std::string::npos ? "" : c.substr(eq + 1);
    auto bad = [&](const std::string& why) {
      fail("data.columns entry \"" + c + "\": " + why +
           " (entries are \"field=column\": the format's field read from the file's column, e.g. "
           "\"prompt=question\"; fields: instruction, input, output, prompt, completion, text, messages, "
           "conversations, and chosen, rejected of preference pairs)");
    };
    if (field.empty() || column.empty() || column.find('=') != std::string::npos) bad("not field=column");
    if (std::find(std::begin(kRenamableFields), std::end(kRenamableFields), field) == std::end(kRenamableFields))
      bad("\"" + field + "\" is not a field of a format");
    if (std::find(fields.begin(), fields.end(), field) != fields.end()) bad("\"" + field + "\" is mapped twice");
    if (std::find(sources.begin(), sources.end(), column) != sources.end()) bad("\"" + column + "\" is read twice");
    fields.push_back(field);
    sources.push_back(column);
  }
}

std::vector<std::pair<std::string, std::string>> column_pairs(const std::vector<std::string>& columns) {
  check_columns(columns);
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const std::string& c : columns) {
    const size_t eq = c.find('=');
    pairs.emplace_back(c.substr(0, eq), c.substr(eq + 1));
  }
  return pairs;
}

// A mapped column replaces the field, so that a file holding both reads the one data.columns names.
void rename_columns(json& rec, const std::vector<std::pair<std::string, std::string>>& pairs) {
  std::vector<std::pair<std::string, json>> moved;
  for (const auto& [field, column] : pairs) {
    auto it = rec.find(column);
    if (it == rec.end()) continue;
    moved.emplace_back(field, std::move(*it));
    rec.erase(it);
  }
  for (auto& [field, value] : moved) rec[field] = std::move(value);
}

ExampleSet read_examples(const std::string& path, const Tokenizer& tok, const ExampleOptions& opt) {
  return read_example_records(DataInput{path, std::nullopt}, tok, opt);
}

ExampleSet parse_examples(const std::string& text, const std::string& path, const Tokenizer& tok,
                          const ExampleOptions& opt) {
  return read_example_records(DataInput{path, text}, tok, opt);
}

DataFormat example_file_format(const std::string& path, const Tokenizer* tok,
                               const std::vector<std::string>& columns) {
  std::optional<DataFormat> format;
  const auto pairs = column_pairs(columns);
  const bool any = for_each_json_record(DataInput{path, std::nullopt}, [&](Record r) {
    rename_columns(r.value, pairs);
    format = detect_format(path, r);
    return false;
  });
  if (!any) fail("data file '" + path + "' is empty");
  if (!format) fail("data file '" + path + "': no usable records");
  return *format == DataFormat::kChat && tok ? default_chat_format(*tok) : *format;
}

}  // namespace mt
