// Data files of JSON records (Alpaca and chat examples, preference pairs): a .json file holding a
// JSON array of records, or JSON Lines (one object per line; .jsonl, or a .json file whose first
// non-blank character is not '[': many tools write JSON Lines under a .json name).
//
// Memory is bounded by the record being read, not by the file: the file is read in 1 MiB chunks
// and one record at a time is cut out of them (a JSON Lines line up to its '\n', an array element
// up to the comma or bracket that ends it at the array's level) and parsed on its own
// (core/bounded_json). The per-record limit (64 MiB) is checked while the record is read, so a
// 2 GB line is refused once 64 MiB of it have been read, never held whole. Malformed JSON is an
// mt::Error naming the file and the line (JSON Lines) or the byte offset (array): the file is
// damaged as a whole. So is a record that is valid JSON but not an object (a number, a string, an
// array, null): such a file is not a data file of records, and it is refused at that first record
// rather than read to its end; records that are objects but do not fit a format are the callers'
// to skip and count.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace mt {

struct JsonRecord {
  nlohmann::json value;  // always an object
  std::string where;     // "line 7" (JSON Lines) or "record 7" (array), 1-based
  // The record's JSON text, valid during the visit only: for readers that need the keys in the
  // file's order (nlohmann::json sorts them), as chat templates' tojson writes tool schemas.
  std::string_view text;
};

// Where a data file's records come from: the file at `path`, read in chunks, or `text` standing in
// for it (fuzzing, parse_examples); `path` names the file in messages and its extension counts.
struct DataInput {
  std::string path;
  std::optional<std::string_view> text;
};

// Calls visit(record) for each record in file order until it returns false. Returns false when
// the input is empty or blank (no record, nothing malformed), true otherwise. mt::Error naming the
// file when it is missing, a directory, not a regular file or unreadable, malformed, holds a record
// longer than 64 MiB or one that is not a JSON object.
bool for_each_json_record(const DataInput& input, const std::function<bool(JsonRecord)>& visit);

// data.columns ("field=column" entries) as (field, column) pairs, refused as check_columns
// (data/examples.h) refuses them; and a record with each pair's column moved to its field's name,
// replacing a field of that name. Every reader of records applies them before it looks at a
// record's fields (defined beside check_columns, in example_reader.cpp).
std::vector<std::pair<std::string, std::string>> column_pairs(const std::vector<std::string>& columns);
void rename_columns(nlohmann::json& record, const std::vector<std::pair<std::string, std::string>>& pairs);

}  // namespace mt
