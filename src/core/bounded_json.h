// The one way meshtrain reads JSON: every reader goes through here, so that no file can make it
// run for minutes or take gigabytes before its error. Each kind of file has a size limit (generous
// for what that file holds in practice, but finite) and every kind a nesting limit, checked by one
// linear scan before nlohmann's parser sees the text (nlohmann recurses and allocates per level:
// 20 MB of '[' cost it ~1.5 GB). Data files are not read as one document: data/json_records.h
// cuts them into records, each parsed here on its own under the per-record limit.
// Every failure is one mt::Error line naming the file; values are quoted in ~100 characters.
#pragma once
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace mt {

// What a JSON text is, which sets its limits (json_limits; docs/reliability.md lists them).
enum class JsonKind {
  hf_config,          // config.json, generation_config.json
  tokenizer,          // tokenizer.json, vocab.json, tokenizer_config.json
  adapter_config,     // adapter_config.json of a PEFT adapter
  checkpoint_manifest,
  safetensors_index,  // model.safetensors.index.json
  safetensors_metadata,  // a JSON string inside a safetensors header
  run_summary,        // run_summary.json
  metrics_line,       // one line of metrics.jsonl
  data_record,        // one example of a data file (a JSONL line or an element of a JSON array)
  hub_api,            // the Hub API's answer for a model revision (its commit and file list)
};

struct JsonLimits {
  const char* name;    // "config.json", "a data record": what "the limit for ..." names
  size_t max_bytes;    // of the whole text
  int max_depth;       // of nested arrays and objects
};
const JsonLimits& json_limits(JsonKind kind);

// Parses `text` as one JSON value of `kind`; mt::Error "<source>: ..." when it is too large or too
// deep, "<source>: not valid JSON (at byte N): ..." when nlohmann refuses it (its message cut).
nlohmann::json parse_json(std::string_view text, JsonKind kind, const std::string& source);
nlohmann::ordered_json parse_ordered_json(std::string_view text, JsonKind kind, const std::string& source);
// parse_json for a text that must be one object (tokenizer.json, vocab.json,
// tokenizer_config.json): a text whose first non-blank byte is not '{' is refused before it is
// parsed, "<source>: not a JSON object (it starts with '1')",, so a file of 150 MB of numbers costs
// a look at one byte instead of a parse of gigabytes.
nlohmann::json parse_json_object(std::string_view text, JsonKind kind, const std::string& source);
// The same, but a value that fails any check is nlohmann's `discarded` instead of an error: for
// logs read back line by line (metrics.jsonl), where the caller decides what a bad line means.
nlohmann::json parse_json_or_discarded(std::string_view text, JsonKind kind);

// The text of the file at `path`, refused before it is read when it is larger than `kind` allows
// (or not a regular file); messages name the path.
std::string read_json_text(const std::string& path, JsonKind kind);
// read_json_text then parse_json, with the path as the source.
nlohmann::json read_json_file(const std::string& path, JsonKind kind);

// The byte offset at which `text` nests deeper than `max_depth`, or npos. Strings (and escapes in
// them) are skipped, so brackets inside them do not count. One pass, no allocation.
size_t json_depth_exceeded_at(std::string_view text, int max_depth);

// nlohmann's exception message without its "[json.exception.parse_error.101] " prefix, at most
// ~200 characters (its "last read: '...'" can quote a megabyte-long token).
std::string json_error_message(const nlohmann::json::exception& e);

}  // namespace mt
