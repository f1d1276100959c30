// meshtrain detokenize --tokenizer PATH (--ids "1 2 3" | --input FILE|-) [--jsonl]
// Token ids back to text: each input line is a JSON list of ids ([1, 2, 3]), a JSON object with an
// "ids" list (what `meshtrain tokenize` writes), or ids separated by spaces; each gives one line of
// text out (or with --jsonl one JSON line {"ids": [...], "text": "..."}, which keeps a text with a
// newline on one line).
#include <charconv>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "cli/input_lines.h"
#include "cli/model_tokenizer.h"
#include "core/bounded_json.h"
#include "core/clipped.h"
#include "core/error.h"

namespace mt::cli {

namespace {

// The ids a line gives, each checked against the vocabulary; `where` names the line.
std::vector<int32_t> parse_ids(std::string_view line, int64_t vocab_size, const std::string& where) {
  std::vector<int64_t> ids;
  const size_t first = line.find_first_not_of(" \t");
  if (first != std::string_view::npos && (line[first] == '[' || line[first] == '{')) {
    const nlohmann::json j = parse_json(line, JsonKind::data_record, where);
    const nlohmann::json* list = &j;
    if (j.is_object()) {
      if (!j.contains("ids")) fail(where + ": a JSON object needs an \"ids\" list");
      list = &j["ids"];
    }
    if (!list->is_array()) fail(where + ": \"ids\" must be a list of integers");
    for (const auto& v : *list) {
      if (!v.is_number_integer()) fail(where + ": ids must be integers, got " + clipped(v.dump()));
      ids.push_back(v.get<int64_t>());
    }
  } else {
    for (size_t i = 0; i < line.size();) {
      if (line[i] == ' ' || line[i] == '\t') {
        ++i;
        continue;
      }
      int64_t v = 0;
      const auto [end, ec] = std::from_chars(line.data() + i, line.data() + line.size(), v);
      const size_t stop = line.find_first_of(" \t", i);
      const std::string_view word = line.substr(i, stop == std::string_view::npos ? stop : stop - i);
      if (ec != std::errc() || end != line.data() + i + word.size())
        fail(where + ": expected token ids (integers separated by spaces, or a JSON list), got '" +
             clipped(std::string(word)) + "'");
      ids.push_back(v);
      i += word.size();
    }
  }
  std::vector<int32_t> out;
  for (int64_t id : ids) {
    if (id < 0 || id >= vocab_size)
      fail(where + ": token id " + std::to_string(id) + " is outside the vocabulary [0, " +
           std::to_string(vocab_size) + ")");
    out.push_back(int32_t(id));
  }
  return out;
}

}  // namespace

Action add_detokenize_command(CLI::App& app) {
  struct Options {
    std::string tokenizer, ids, input;
    bool jsonl = false;
  };
  auto opt = std::make_shared<Options>();
  auto* sub = app.add_subcommand("detokenize", "Turn token ids back into text, one line of ids per text");
  sub->add_option("--tokenizer,-t", opt->tokenizer,
                  "Tokenizer file or directory (as for tokenize, or a GGUF file's own)")
      ->required();
  CLI::Option* ids = sub->add_option("--ids", opt->ids, "One sequence of ids: \"1 2 3\" or \"[1, 2, 3]\" (default: none, the lines of --input)");
  sub->add_option("--input,-i", opt->input,
                  "File of id sequences, one per line (\"-\": standard input): a JSON list, a JSON object with "
                  "\"ids\" (tokenize's output), or ids separated by spaces (default: standard input, without --ids)")
      ->excludes(ids);
  sub->add_flag("--jsonl", opt->jsonl,
                "Print JSON lines {\"ids\": [...], \"text\": \"...\"} instead of the plain text (a text "
                "with a newline then stays on its line; bytes that are not UTF-8 become U+FFFD)");
  return [opt, ids] {
    auto tok = load_any_tokenizer(opt->tokenizer);
    auto emit = [&](std::string_view line, const std::string& where) {
      const std::vector<int32_t> v = parse_ids(line, tok->vocab_size(), where);
      const std::string text = tok->decode(v);
      if (!opt->jsonl) {
        std::cout << text << '\n';
        return;
      }
      const nlohmann::ordered_json out = {{"ids", v}, {"text", text}};
      std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    };
    if (ids->count() > 0) emit(opt->ids, "--ids");
    // A line of ids is parsed under a data record's limit (64 MiB): no longer one is read.
    else for_each_input_line(opt->input.empty() ? "-" : opt->input, json_limits(JsonKind::data_record).max_bytes, emit);
    std::cout.flush();
    return 0;
  };
}

}  // namespace mt::cli
