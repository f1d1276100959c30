// Preference-pair files -> two token sequences per pair (declared in preference_pairs.h). Like
// example_reader.cpp: broken JSON is an error (the file is damaged as a whole), a bad record a
// counted skip.
#include "data/preference_pairs.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <optional>
#include <tuple>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/chat_templates.h"
#include "data/json_records.h"

namespace mt {
// A named namespace around the file's helpers: in a unity batch (cmake/build_speed.cmake) the other
// data files' anonymous-namespace helpers (append, read_whole, Record...) share this file's scope.
namespace preference_reader {
namespace {

using nlohmann::json;

using Record = JsonRecord;

bool is_pair_record(const json& v) { return v.contains("chosen") && v.contains("rejected"); }

bool has(const json& obj, const char* name) {
  auto it = obj.find(name);
  return it != obj.end() && !it->is_null();
}

// A record is conversational when any of its three fields is a message list.
bool is_conversational(const json& rec) {
  for (const char* name : {"prompt", "chosen", "rejected"}) {
    auto it = rec.find(name);
    if (it != rec.end() && it->is_array()) return true;
  }
  return false;
}

using Why = std::optional<std::string>;

std::string quoted(const char* name) { return "\"" + std::string(name) + "\""; }

// A required non-empty string field, or why the record is unusable.
Why string_field(const json& rec, const char* name, std::string& value) {
  if (!has(rec, name)) return quoted(name) + " is missing";
  const json& v = rec.at(name);
  if (!v.is_string()) return quoted(name) + " is not a string";
  value = v.get<std::string>();
  if (value.empty()) return quoted(name) + " is empty";
  return std::nullopt;
}

Why message_list(const json& rec, const char* name, std::vector<ChatMessage>& out) {
  if (!has(rec, name)) return quoted(name) + " is missing";
  const json& v = rec.at(name);
  if (!v.is_array()) return quoted(name) + " is not a message list (the record's other fields are)";
  if (v.empty()) return quoted(name) + " is an empty message list";
  for (size_t i = 0; i < v.size(); ++i) {
    const json& m = v[i];
    const std::string which = quoted(name) + " message " + std::to_string(i + 1);
    if (!m.is_object()) return which + " is not a JSON object";
    ChatMessage cm;
    for (auto [key, dest] : {std::pair{"role", &cm.role}, std::pair{"content", &cm.content}}) {
      auto it = m.find(key);
      if (it == m.end() || it->is_null()) return which + ": " + quoted(key) + " is missing";
      if (!it->is_string()) return which + ": " + quoted(key) + " is not a string";
      *dest = it->get<std::string>();
    }
    if (cm.role != "system" && cm.role != "user" && cm.role != "assistant")
      return which + ": unknown role \"" + cm.role + "\" (expected system, user or assistant)";
    out.push_back(std::move(cm));
  }
  return std::nullopt;
}

bool same_message(const ChatMessage& a, const ChatMessage& b) { return a.role == b.role && a.content == b.content; }

// One pair before truncation: the shared prompt and the two completions.
struct Pair {
  std::vector<int32_t> prompt;  // all untrained
  Example chosen, rejected;     // the completions' tokens and mask
};

void append(Example& ex, const std::vector<int32_t>& ids, bool trained) {
  ex.tokens.insert(ex.tokens.end(), ids.begin(), ids.end());
  ex.trained.insert(ex.trained.end(), ids.size(), trained ? 1 : 0);
}

// Standard pair rendered as plain text or with the Alpaca prompt: BOS + prompt, answer + EOS.
Pair render_text_pair(const Tokenizer& tok, DataFormat format, const std::string& prompt,
                      const std::string& chosen, const std::string& rejected) {
  Pair p;
  if (tok.bos_id() >= 0) p.prompt.push_back(tok.bos_id());
  const std::vector<int32_t> body = tok.encode(format == DataFormat::kAlpaca ? alpaca_prompt(prompt, "") : prompt);
  p.prompt.insert(p.prompt.end(), body.begin(), body.end());
  for (auto [text, ex] : {std::pair{&chosen, &p.chosen}, std::pair{&rejected, &p.rejected}}) {
    append(*ex, tok.encode(*text), true);
    if (tok.eos_id() >= 0) append(*ex, {tok.eos_id()}, true);
  }
  return p;
}

// The error for a conversation whose rendering does not start with its prompt's: a template whose
// text at the prompt/answer boundary tokenizes differently in the two (e.g. an answer starting
// with a newline that merges with the header's), so the prompt's tokens cannot be masked.
[[noreturn]] void prompt_not_prefix(const std::string& path, const std::string& where, DataFormat format,
                                    const char* which, size_t prompt_size, size_t at) {
  fail("data file '" + path + "': " + where + ": the " + std::string(format_name(format)) +
       " rendering of the " + which + " conversation does not start with the rendering of its prompt (" +
       std::to_string(prompt_size) + " tokens, differing at token " + std::to_string(at) +
       "), so the prompt's tokens cannot be told from the answer's: the text where the prompt ends and the " +
       which + " answer begins tokenizes differently in the two (e.g. an answer starting with a newline)");
}

// Conversational pair: prompt messages and the two completions' messages, rendered with `format`.
// Returns why the record is skipped; mt::Error for a tokenizer lacking the template's special tokens,
// or (prompt_not_prefix) a rendering whose prompt part cannot be told apart.
Why render_conversation_pair(const Tokenizer& tok, DataFormat format, const std::vector<ChatMessage>& prompt,
                             const std::vector<ChatMessage>& chosen, const std::vector<ChatMessage>& rejected,
                             const std::string& path, const std::string& where, Pair& out) {
  for (auto [name, msgs] : {std::pair{"chosen", &chosen}, std::pair{"rejected", &rejected}}) {
    if (msgs->empty()) return "the " + std::string(name) + " completion is empty (no messages after the prompt)";
    if ((*msgs)[0].role != "assistant")
      return "the " + std::string(name) + " completion starts with a " + (*msgs)[0].role +
             " message, not an assistant message";
    bool text = false;
    for (const ChatMessage& m : *msgs) text = text || (m.role == "assistant" && !m.content.empty());
    if (!text) return "the " + std::string(name) + " completion is empty (no assistant text)";
  }
  if (!prompt.empty() && prompt.back().role == "assistant")
    return std::string("the prompt ends with an assistant message");
  std::vector<ChatMessage> full_chosen = prompt, full_rejected = prompt;
  full_chosen.insert(full_chosen.end(), chosen.begin(), chosen.end());
  full_rejected.insert(full_rejected.end(), rejected.begin(), rejected.end());
  if (auto why = chat_roles_problem(full_chosen, format)) return "chosen: " + *why;
  if (auto why = chat_roles_problem(full_rejected, format)) return "rejected: " + *why;
  out.prompt = conversation_prompt(tok, prompt, format);
  for (auto [name, full, ex] : {std::tuple{"chosen", &full_chosen, &out.chosen},
                                std::tuple{"rejected", &full_rejected, &out.rejected}}) {
    Example all = render_conversation(tok, *full, format);
    const size_t n = out.prompt.size();
    const auto differ = std::mismatch(out.prompt.begin(), out.prompt.end(), all.tokens.begin(), all.tokens.end()).first;
    if (differ != out.prompt.end()) prompt_not_prefix(path, where, format, name, n, size_t(differ - out.prompt.begin()));
    // The prompt's part (its own assistant turns included) is untrained; the rest keeps the
    // template's mask: assistant text and the token that closes each assistant turn.
    ex->tokens.assign(all.tokens.begin() + std::ptrdiff_t(n), all.tokens.end());
    ex->trained.assign(all.trained.begin() + std::ptrdiff_t(n), all.trained.end());
  }
  return std::nullopt;
}

// Renders one record into `out`, or says why it is skipped. `format` is the file's resolved format.
Why render_record(const json& rec, DataFormat format, const Tokenizer& tok, const std::string& path,
                  const std::string& where, Pair& out) {
  for (const char* name : {"chosen", "rejected"})
    if (!has(rec, name)) return quoted(name) + " is missing";
  if (!is_conversational(rec)) {
    std::string prompt, chosen, rejected;
    if (auto why = string_field(rec, "chosen", chosen)) return why;
    if (auto why = string_field(rec, "rejected", rejected)) return why;
    if (auto why = string_field(rec, "prompt", prompt)) {
      if (!has(rec, "prompt")) return *why + " (a pair of strings needs one)";
      return why;
    }
    if (!is_chat_format(format)) {
      out = render_text_pair(tok, format, prompt, chosen, rejected);
      return std::nullopt;
    }
    return render_conversation_pair(tok, format, {{"user", prompt}}, {{"assistant", chosen}},
                                    {{"assistant", rejected}}, path, where, out);
  }
  if (!is_chat_format(format))
    return "message lists in a file read as " +
           std::string(format == DataFormat::kAlpaca ? "alpaca" : "plain text") +
           " (its first pair is strings); set a chat format to read them";
  std::vector<ChatMessage> chosen, rejected, prompt;
  if (auto why = message_list(rec, "chosen", chosen)) return why;
  if (auto why = message_list(rec, "rejected", rejected)) return why;
  bool implicit = !has(rec, "prompt");
  if (!implicit) {
    const json& p = rec.at("prompt");
    if (p.is_string()) {
      // TRL's datasets: a prompt string with answers of one assistant message each is one user
      // message; where the lists hold the whole conversation (they start with a non-assistant
      // message), TRL ignores the string and takes the shared start as the prompt.
      if (p.get<std::string>().empty()) return std::string("\"prompt\" is empty");
      if (chosen[0].role != "assistant" || rejected[0].role != "assistant") implicit = true;
      else prompt = {{"user", p.get<std::string>()}};
    } else if (auto why = message_list(rec, "prompt", prompt)) {
      return why;
    }
  }
  if (implicit) {
    // TRL's extract_prompt: the longest common leading run of messages is the prompt.
    size_t k = 0;
    while (k < chosen.size() && k < rejected.size() && same_message(chosen[k], rejected[k])) ++k;
    prompt.assign(chosen.begin(), chosen.begin() + std::ptrdiff_t(k));
    chosen.erase(chosen.begin(), chosen.begin() + std::ptrdiff_t(k));
    rejected.erase(rejected.begin(), rejected.begin() + std::ptrdiff_t(k));
  }
  return render_conversation_pair(tok, format, prompt, chosen, rejected, path, where, out);
}

// True when some token after the first is trained: the sequence has something to predict.
bool has_prediction(const Example& ex) {
  for (size_t i = 1; i < ex.trained.size(); ++i)
    if (ex.trained[i]) return true;
  return false;
}

Example joined(const std::vector<int32_t>& prompt, const Example& completion) {
  Example ex;
  append(ex, prompt, false);
  ex.tokens.insert(ex.tokens.end(), completion.tokens.begin(), completion.tokens.end());
  ex.trained.insert(ex.trained.end(), completion.trained.begin(), completion.trained.end());
  return ex;
}

// TRL 0.11 tokenize_row's truncation; true when anything was cut.
bool truncate_pair(Pair& p, int64_t max_length, int64_t max_prompt, TruncationMode mode) {
  if (max_length <= 0) return false;
  const size_t limit = size_t(max_length), prompt_limit = size_t(max_prompt);
  const size_t longer = std::max(p.chosen.tokens.size(), p.rejected.tokens.size());
  if (p.prompt.size() + longer <= limit) return false;
  bool cut = false;
  if (p.prompt.size() > prompt_limit) {
    if (mode == TruncationMode::kKeepEnd)
      p.prompt.erase(p.prompt.begin(), p.prompt.end() - std::ptrdiff_t(prompt_limit));
    else
      p.prompt.resize(prompt_limit);
    cut = true;
  }
  if (p.prompt.size() + longer > limit) {
    const size_t answer_limit = limit - prompt_limit;
    for (Example* ex : {&p.chosen, &p.rejected}) {
      if (ex->tokens.size() <= answer_limit) continue;
      ex->tokens.resize(answer_limit);
      ex->trained.resize(answer_limit);
      cut = true;
    }
  }
  return cut;
}

[[noreturn]] void no_pairs(const std::string& path) {
  fail("data file '" + path + "': no record is a preference pair: a preference record needs \"chosen\" and "
       "\"rejected\", either strings with a \"prompt\" string, or message lists ([{\"role\": ..., \"content\": "
       "...}]) with an optional \"prompt\" (a message list or string)");
}

// Whether the first pair record of `input` is conversational (it sets the file's format); nullopt
// when no record is a pair. A first pass that stops there: the first record, in a usable file.
std::optional<bool> first_pair_is_conversational(const DataInput& input,
                                                 const std::vector<std::pair<std::string, std::string>>& columns) {
  std::optional<bool> conversational;
  const bool any = for_each_json_record(input, [&](Record r) {
    rename_columns(r.value, columns);
    if (!is_pair_record(r.value)) return true;
    conversational = is_conversational(r.value);
    return false;
  });
  if (!any) fail("data file '" + input.path + "' is empty");
  return conversational;
}

// The pairs of `input`, rendered record by record as the file is read: memory holds the sequences
// kept, not the file.
PreferenceSet parse(const DataInput& input, const Tokenizer& tok, const PreferenceOptions& opt) {
  const std::string& path = input.path;
  const std::string file = "data file '" + path + "'";
  if (opt.max_length < 0) fail(file + ": max_length must be >= 0");
  if (opt.max_prompt_length < 0) fail(file + ": max_prompt_length must be >= 0");
  const int64_t max_prompt =
      opt.max_prompt_length > 0 ? opt.max_prompt_length : std::max<int64_t>(1, opt.max_length / 4);
  if (opt.max_length > 0 && max_prompt >= opt.max_length)
    fail(file + ": max_prompt_length " + std::to_string(max_prompt) + " must be less than max_length " +
         std::to_string(opt.max_length) + " (the answers get max_length - max_prompt_length tokens)");
  const auto columns = column_pairs(opt.columns);
  const std::optional<bool> conversational = first_pair_is_conversational(input, columns);
  if (!conversational) no_pairs(path);

  PreferenceSet set;
  set.format = opt.format;
  if (!is_chat_format(set.format) && *conversational) set.format = default_chat_format(tok);
  std::string first_skip;
  for_each_json_record(input, [&](Record r) {
    rename_columns(r.value, columns);
    ++set.records;
    Pair pair;
    Why why;
    try {
      why = render_record(r.value, set.format, tok, path, r.where, pair);
    } catch (const Error& e) {  // a setup problem (tokenizer without the template's specials)
      const std::string msg = e.what();
      if (msg.rfind(file, 0) == 0) throw;
      fail(file + ": " + msg);
    }
    bool cut = false;
    if (!why) {
      cut = truncate_pair(pair, opt.max_length, max_prompt, opt.truncation);
      for (auto [name, ex] : {std::pair{"chosen", &pair.chosen}, std::pair{"rejected", &pair.rejected}})
        if (!why && !has_prediction(joined(pair.prompt, *ex)))
          why = "the " + std::string(name) + " sequence has no trained token" +
                (cut ? " left after truncation to " + std::to_string(opt.max_length) + " tokens" : "");
    }
    if (why) {
      if (set.skipped++ == 0) first_skip = r.where + ": " + *why;
      return true;
    }
    if (cut) ++set.truncated;
    set.sequences.push_back(joined(pair.prompt, pair.chosen));
    set.sequences.push_back(joined(pair.prompt, pair.rejected));
    return true;
  });
  if (set.sequences.empty())
    fail(file + ": no usable preference pairs (" + std::to_string(set.skipped) + " of " +
         std::to_string(set.records) + " records skipped; first: " + first_skip + ")");
  if (set.skipped > 0 || set.truncated > 0) {
    set.warning = "warning: " + file + ": ";
    if (set.skipped > 0)
      set.warning += std::to_string(set.skipped) + " of " + std::to_string(set.records) +
                     " records skipped (first: " + first_skip + ")";
    if (set.skipped > 0 && set.truncated > 0) set.warning += "; ";
    if (set.truncated > 0)
      set.warning += std::to_string(set.truncated) + " pairs truncated to " + std::to_string(opt.max_length) + " tokens";
  }
  if (!set.warning.empty() && !opt.quiet) std::cerr << set.warning << "\n";
  return set;
}

bool is_preference(const std::string& path) {
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext != ".json" && ext != ".jsonl") return false;
  bool found = false;
  for_each_json_record(DataInput{path, std::nullopt}, [&](const Record& r) {
    found = is_pair_record(r.value);
    return false;
  });
  return found;
}

DataFormat file_format(const std::string& path, const Tokenizer* tok, const std::vector<std::string>& columns) {
  const std::optional<bool> conversational =
      first_pair_is_conversational(DataInput{path, std::nullopt}, column_pairs(columns));
  if (!conversational) no_pairs(path);
  if (!*conversational) return DataFormat::kAuto;
  return tok ? default_chat_format(*tok) : DataFormat::kChat;
}

}  // namespace
}  // namespace preference_reader

std::string_view truncation_mode_name(TruncationMode mode) {
  return mode == TruncationMode::kKeepStart ? "keep_start" : "keep_end";
}

TruncationMode parse_truncation_mode(std::string_view name) {
  if (name == "keep_end") return TruncationMode::kKeepEnd;
  if (name == "keep_start") return TruncationMode::kKeepStart;
  fail("unknown truncation mode '" + std::string(name) + "' (expected keep_end or keep_start)");
}

PreferenceSet read_preference_pairs(const std::string& path, const Tokenizer& tok, const PreferenceOptions& opt) {
  return preference_reader::parse(DataInput{path, std::nullopt}, tok, opt);
}

PreferenceSet parse_preference_pairs(const std::string& text, const std::string& path, const Tokenizer& tok,
                                     const PreferenceOptions& options) {
  return preference_reader::parse(DataInput{path, text}, tok, options);
}

bool is_preference_file(const std::string& path) { return preference_reader::is_preference(path); }

DataFormat preference_file_format(const std::string& path, const Tokenizer* tok,
                                  const std::vector<std::string>& columns) {
  return preference_reader::file_format(path, tok, columns);
}

}  // namespace mt
