// Data files of JSON records (Alpaca and chat examples, preference pairs): a .json file holding a
// JSON array of records, or JSON Lines (one object per line; .jsonl, or a .json file whose first
// character is not '[': many tools write JSON Lines under a .json name). Each record is parsed on
// its own (core/bounded_json: a size and a nesting limit per record), so a huge or deeply nested
// file is refused at its first bad record, in time and memory linear in the file, instead of
// being handed to the parser whole. Malformed JSON is an mt::Error naming the file and the line
// (JSON Lines) or the byte offset (array): the file is damaged as a whole.
#pragma once
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace mt {

struct JsonRecord {
  nlohmann::json value;
  std::string where;  // "line 7" (JSON Lines) or "record 7" (array), 1-based
};

// The whole data file; mt::Error naming it when it is missing, a directory, not a regular file or
// unreadable.
std::string read_data_file(const std::string& path);
// Whether `text` (not all blank) is read as JSON Lines; `path` for its extension.
bool is_json_lines(const std::string& path, std::string_view text);
// Calls visit(record) for each record in file order until it returns false.
void for_each_json_record(const std::string& path, std::string_view text,
                          const std::function<bool(JsonRecord)>& visit);
std::vector<JsonRecord> parse_json_records(const std::string& path, std::string_view text);

}  // namespace mt
